/*
Package statemachine is the deterministic state machine of one Warden shard:
hierarchical locks, leases, fair wait queues with direct hand-off, fencing
tokens, elections, a small KV store, and the key ranges the shard owns. It
implements dragonboat's IStateMachine (and IHash), and Image encodes its
state in memory so that the shard layer can run it as a concurrent state
machine (snapshots written beside the applies); the shard layer proposes
entries made by EncodeCommand and reads results with DecodeResults.

# Entries

One Raft entry is a versioned batch of client operations (wire.Request)
stamped with the leader's clock. Update answers every op, in order, with a
wire.Response carrying the request's ID; an entry that cannot be decoded is
answered with one Malformed response and changes nothing. A bad op gets its
own typed error code (*wire.Error codes) while the other ops of the batch
still apply. Update never returns an error and never panics on input. An op
validates before it mutates, so a refused op changes nothing; a bug that
panics inside an op stops the replica, naming the entry and the op, rather
than carrying on past a half-applied op.

# Determinism

Applying the same log gives the same state, byte for byte: Update reads no
clock, draws no random numbers and never lets map or hash-table iteration
order decide anything (where it iterates such a set, the result is sorted or
order-independent). "Now" is the maximum stamped time seen so far, so time
never goes back when leadership moves to a node with a slower clock.
GetHash digests the snapshot, so replicas can be compared.

# Guarantees

Mutual exclusion. A lock on P covers P's subtree. Exclusive on P conflicts
with any lock on P, on an ancestor of P, or inside P's subtree; shared on P
conflicts only with exclusive locks there. Counters in the trie make every
conflict check O(depth). No two conflicting holds ever coexist.

Owners and reentrancy. An owner is (lease, Request.Owner). An owner asking
again for a path it holds gets the same token and one more hold (exclusive
held and shared asked is reentrant too); a release undoes one hold. A sole
shared holder asking for exclusive is upgraded at once with a new token, or
refused with UpgradeConflict; upgrades never queue. A request that conflicts
only with locks its own owner holds on ancestors or descendants is refused
with SelfConflict instead of queueing behind itself.

Fencing. One counter per shard issues every new grant's token: tokens are
above every earlier token and above the fence floor (OpRaiseFence), so they
strictly increase per path, never repeat, and are never 0. A release, renew,
proclaim or resign must name a current holder's token: StaleToken if the
token was issued here before (or lies under the floor), NotHolder otherwise.

Leases. Session leases have client-chosen ids and are created by their first
use with a TTL within [MinTTL, MaxTTL]. Acquire without a lease makes a
single-lock lease (id SingleLeaseBit|token) that ends with its lock; OpRenew
sets its TTL. Revoke and Expire end a lease: its waiters leave first (they
are never granted), then its locks are released with hand-off and its
ephemeral keys deleted, and the id is refused (SessionExpired) for
TombstoneMs. The state machine never decides that a lease expired: the shard
leader's lessor proposes OpExpire. EvLease and EvLeaseEnd tell it which
leases exist. A refused request leaves no lease behind. With identities,
what each holds on the shard is bounded (MaxOwnerLeases, MaxOwnerLocks,
MaxOwnerWaiters; quotas.go): over a quota a request is TooMany.

Fairness. A blocking request that conflicts with a holder, or with any
queued request, is queued FIFO: nothing barges past a queued conflicting
request. Whenever holds or waiters go away, the same command grants, in
arrival order, every waiter that now conflicts neither with a holder nor with
an earlier waiter still queued (so consecutive shared waiters go together),
and the response lists exactly those grants. After every entry no queued
request could be granted. Handing a lock to the next waiter of one path
costs O(depth), however long the queue.

Exactly once. A mutating op carrying Client and Seq is applied once: a retry
gets the first outcome (for a queued acquire: Queued while it waits, then
the grant or Cancelled). A record keeps the op and a digest of the path,
paths and lease it answered; another request under the same (Client, Seq)
is answered SeqReused. (With auth on the router has made Client owned by
the sender's identity, wire.OwnedClient, so records never mix identities.)
AckSeq drops older records; a retry below it is answered Ambiguous, and a
new request whose AckSeq is above its own Seq is InvalidArgument. A queued acquire's record survives the floor: resolved
after the floor passed it, it stays until a later request of the client
carries an AckSeq above it, so a client that re-attaches with the same Seq
gets the outcome. Clients idle for ClientIdleMs (since their last request or
the resolution of one of their waits) are forgotten unless they have a
queued request. OpCancel withdraws an acquire, campaign or multi-lock by
(Client, Seq) and answers its fate: the grant (a multi-lock's holds) if it
was granted and still holds, nothing otherwise; a queued one is dropped, and
one this shard has not seen yet (a cancel carrying its path) is recorded as
Cancelled, so the acquire takes nothing should it still arrive. A released
event names the request that ended the hold (Client, Seq) when that request
did not name the hold's lease and owner: the holder did not end it itself
and must be told (wire.Event.TellsHolder).

Beyond plain locks (extras.go, multi.go, revoke.go, deadlock.go).
Semaphores: an acquire with Permits N is a shared hold, one of at most N at
its path, FIFO at the path, never mixed with plain holds there. AcquireMulti
grants every path of a set to one session owner in one command or none.
RevokeLock sets a revocation deadline (FlagForce: admin; otherwise only on
FlagRevocable holds); lock-delay makes a path ungrantable after an expiry or
a forced revocation. Both are stamped deadlines that only OpDeadlines acts
on, so time still comes from the log: NextDeadline tells the shard leader
when to propose it. Campaign priorities order waiting candidates; HandOver
moves leadership to a named candidate in one command. A blocking session
request that would close a wait-for cycle is refused with Deadlock.

Ranges. The shard owns the ranges of its last OpSetRanges (generations never
go back). A data op whose span (hierarchy.Span) starts outside them gets
WrongShard with a hint; one that starts inside but is not contained in one
range gets SpansRanges. A fresh state machine owns nothing.

Events. Every change emits a wire.Event with a strictly increasing revision,
its kind and cause (so a watch can tell released from expired, revoked or
handed off). Hold-count changes of reentrant owners emit nothing. The
Observer sees each entry's events.

Snapshots. SaveSnapshot writes all replicated state (locks, holds, queues,
leases, tombstones, KV, elections, fence counter and floor, revision, stamped
time, applied index, exactly-once records, ranges, and in tagged sections the
per-lock extras, semaphores and lock-delays) in a compact binary form;
RecoverFromSnapshot rebuilds exactly that state, so recover(save(s)) saves
the same bytes and hashes the same.
*/
package statemachine
