package harness

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// A busy process in a 0.1-core cgroup is stopped by the kernel when it
// uses up its quota, and the cgroup is gone after Remove.
func TestCPULimitThrottles(t *testing.T) {
	l, err := NewCPULimit("test", 0.1, 10*time.Millisecond)
	if err != nil {
		t.Skipf("no writable cgroup cpu controller here: %v", err)
	}
	defer l.Remove()
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := l.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	// The loop never sleeps: every period it runs in, it exhausts 1 ms of
	// quota, so some periods are throttled however loaded the machine is.
	var st CPUStat
	for i := 0; i < 100 && st.Throttled == 0; i++ {
		time.Sleep(50 * time.Millisecond)
		if st, err = l.Stat(); err != nil {
			t.Fatal(err)
		}
	}
	if st.Periods == 0 || st.Throttled == 0 || st.ThrottledTime <= 0 {
		t.Fatalf("a busy loop limited to 0.1 cores was never throttled: %+v", st)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(l.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cgroup %s still there after Remove: %v", l.Dir, err)
	}
}

// A quota the kernel would refuse is refused up front, with the reason.
func TestCPULimitRefusesTinyQuota(t *testing.T) {
	if _, err := NewCPULimit("tiny", 0.05, 10*time.Millisecond); err == nil {
		t.Fatal("0.05 cores per 10 ms (500 µs) accepted")
	}
}
