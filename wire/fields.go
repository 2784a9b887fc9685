package wire

// Field numbers: the keys of the msgpack maps that carry a Request and a
// Response (docs/protocol.md §3.1, §3.2). They are the protocol: a number is
// never reused, and every key is below 128, so it is one byte on the wire.
// Each is declared here once; the library codec (codec.go), the hand-written
// encoder (append.go) and Reader (reader.go) use these names, and
// TestFieldTable checks every codec and the protocol page against them.
// The name of each is req or resp and the name of its struct field.

// Request field numbers.
const (
	reqID        = 1
	reqOp        = 2
	reqPath      = 3
	reqMode      = 4
	reqLease     = 5
	reqTTL       = 6
	reqWait      = 7
	reqToken     = 8
	reqOwner     = 9
	reqValue     = 10
	reqVersion   = 11
	reqRev       = 12
	reqClient    = 13
	reqSeq       = 14
	reqAckSeq    = 15
	reqGen       = 16
	reqFlags     = 17
	reqLimit     = 18
	reqStream    = 19
	reqAuth      = 20
	reqLeases    = 21
	reqRanges    = 22
	reqShard     = 23
	reqTerm      = 24
	reqPaths     = 30
	reqGrace     = 31
	reqTarget    = 32
	reqPermits   = 33
	reqLockDelay = 34
	reqPriority  = 35
	reqPosition  = 36
	reqTrace     = 60
	reqRemaining = 65
	reqIdentity  = 70
	reqLeaseKey  = 71
	reqChunk     = 80
	reqToReplica = 81
)

// Response field numbers.
const (
	respID         = 1
	respCode       = 2
	respMsg        = 3
	respToken      = 4
	respLease      = 5
	respTTL        = 6
	respRev        = 7
	respValue      = 8
	respVersion    = 9
	respMode       = 10
	respCount      = 11
	respOwner      = 12
	respPath       = 13
	respStream     = 14
	respHint       = 15
	respHolders    = 16
	respWaiters    = 17
	respKVs        = 18
	respEvents     = 19
	respLeases     = 20
	respRanges     = 21
	respGrants     = 22
	respTable      = 23
	respSigned     = 24
	respDelayUntil = 30
	respRevokeAt   = 31
	respPermits    = 32
	respPosition   = 33
	respDenied     = 70
)
