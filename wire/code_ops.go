package wire

// Codes of the operations surface (backup and restore), 45–49.
const (
	// RestoreRefused: a backed-up shard state was offered to a shard that
	// already holds state of its own (a restore only goes into a new cluster).
	RestoreRefused Code = 45
)

func init() {
	codeNames[RestoreRefused] = "restore refused"
}
