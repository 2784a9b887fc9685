package wire

// Codes of the trust surface (client identity, quotas), 70–74.
const (
	// SeqReused: the request's (Client, Seq) already answered a different
	// request on this shard (another op, path or lease). A retry must be
	// the same request; a new request needs a new Seq. Nothing was applied
	// and the first request's record is unchanged.
	SeqReused Code = 70
)

// ErrSeqReused matches SeqReused answers (errors.Is).
var ErrSeqReused = &Error{Code: SeqReused}

func init() {
	codeNames[SeqReused] = "sequence number reused"
}
