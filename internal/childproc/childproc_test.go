package childproc

import (
	"strings"
	"testing"
)

func Test_Env(t *testing.T) {
	t.Setenv("KVSELECT_PORT", "1")
	t.Setenv("DYN_ROUTER_TEMPERATURE", "1")
	t.Setenv("KVSIM_WORKERS", "1")
	t.Setenv("KEEP_ME", "1")
	env := strings.Join(Env(), "\n")
	for _, gone := range []string{"KVSELECT_PORT=", "DYN_ROUTER_TEMPERATURE=", "KVSIM_WORKERS="} {
		if strings.Contains(env, gone) {
			t.Fatalf("%s is passed to children", gone)
		}
	}
	if !strings.Contains(env, "KEEP_ME=1") {
		t.Fatal("an unrelated variable was dropped")
	}
}

func Test_ReservePorts(t *testing.T) {
	ports, lns, err := ReservePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	defer CloseAll(lns)
	seen := map[int]bool{}
	for _, p := range ports {
		if p == 0 || seen[p] {
			t.Fatalf("ports %v", ports)
		}
		seen[p] = true
	}
}
