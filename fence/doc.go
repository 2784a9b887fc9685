// Package fence is what a resource protected by Warden locks needs to
// enforce fencing tokens: a lock holder passes its token with every write,
// and the resource refuses any token lower than the highest it has seen for
// that lock, so a holder that was paused (GC, VM migration, partition) and
// lost its lock can no longer write.
//
//   - Guard: an in-memory guard for a resource in one process.
//   - Exec: a guarded update for SQL databases (PostgreSQL): the token check
//     and the write commit in one transaction.
//   - Verifier: checks signed tokens offline with the cluster's Ed25519
//     public key, so a resource can trust a token without asking Warden.
package fence
