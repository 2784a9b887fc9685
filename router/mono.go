package router

import "time"

// epoch anchors monotonic instants kept as durations since it: 8 bytes
// where a time.Time takes 24, in the objects made per request (call must
// stay within 512 bytes, the largest size the allocator serves without a
// per-object header).
var epoch = time.Now()

// monoNow is the monotonic time since epoch.
func monoNow() time.Duration { return time.Since(epoch) }
