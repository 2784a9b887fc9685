package wire

// Answerer receives the one answer of a request submitted to a shard. A
// caller's own per-request object can implement it, so that handing the
// request over costs no closure: at tens of thousands of requests a second
// on a leader, each closure per request is an allocation and GC work.
type Answerer interface {
	Answer(*Response)
}

// AnswerFunc adapts a function to Answerer (a func value converts to an
// interface without allocating).
type AnswerFunc func(*Response)

// Answer calls f.
func (f AnswerFunc) Answer(resp *Response) { f(resp) }
