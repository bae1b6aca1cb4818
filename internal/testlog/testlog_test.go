package testlog

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func Test_BufferTakesConcurrentWrites(t *testing.T) {
	var b Buffer
	log := b.Logger(slog.LevelInfo)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log.Info("hello", "i", i)
			log.Debug("below the level")
		}()
	}
	wg.Wait()
	out := b.String()
	if got := strings.Count(out, "msg=hello"); got != 8 || strings.Contains(out, "below the level") {
		t.Fatalf("%d records at INFO, want 8:\n%s", got, out)
	}
}
