package loadtest

import (
	"fmt"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows a bar over the run's wall time with the live rate of the
// primary op, when cfg.Progress is set (the CLI sets it on a terminal only).
func (e *env) progress(r *run, start, end time.Time) (stop func()) {
	if e.cfg.Progress == nil {
		return func() {}
	}
	total := int64(end.Sub(start) / (100 * time.Millisecond))
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(e.cfg.Progress),
		progressbar.OptionSetDescription(fmt.Sprintf("%s/%s", e.d.Name(), e.cfg.Scenario)),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		var last int64
		lastAt := time.Now()
		rate := 0.0
		for {
			select {
			case <-done:
				_ = bar.Finish()
				return
			case now := <-t.C:
				n := r.done.Load()
				if dt := now.Sub(lastAt); dt >= time.Second {
					rate = float64(n-last) / dt.Seconds()
					last, lastAt = n, now
				}
				bar.Describe(fmt.Sprintf("%s/%s %8.0f %s/s", e.d.Name(), e.cfg.Scenario, rate, r.primary))
				_ = bar.Set64(min(int64(now.Sub(start)/(100*time.Millisecond)), total))
			}
		}
	}()
	return func() { close(done); <-finished }
}
