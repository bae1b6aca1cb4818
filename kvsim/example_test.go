package kvsim_test

import (
	"fmt"
	"log"

	"github.com/kvselect/kvselect/kvsim"
)

func Example() {
	sim, err := kvsim.Start(kvsim.Config{Workers: 1, BlockSize: 4, CacheBlocks: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer sim.Close()
	w := sim.Worker(1)

	prompt := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9} // two full blocks
	for range 2 {
		res, err := w.Serve(0, prompt)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%+v\n", res)
	}
	res, _ := w.Serve(0, []uint32{10, 11, 12, 13, 14, 15, 16, 17})
	fmt.Printf("%+v\n", res)
	last, _ := w.LastSeq(0)
	fmt.Println("messages published:", last+1)
	// Output:
	// {Blocks:2 CachedBlocks:0 StoredBlocks:2 EvictedBlocks:0}
	// {Blocks:2 CachedBlocks:2 StoredBlocks:0 EvictedBlocks:0}
	// {Blocks:2 CachedBlocks:0 StoredBlocks:2 EvictedBlocks:1}
	// messages published: 2
}
