/*
Package client is the Go client of Warden, a distributed lock service: locks
with fencing tokens, sessions, elections, watches and a small KV store.

# Connecting

	c, err := client.New(ctx, []string{"10.0.0.1:7070", "10.0.0.2:7070"})
	defer c.Close()

A Client keeps a small pool of TCP connections (WithPoolSize, default 2) and
pipelines every request over them: many requests are in flight per
connection and answers are matched by id. A broken connection is redialled
in the background, moving to the next endpoint on each attempt, with
full-jitter exponential backoff (WithBackoff). Every call takes a context
and returns when it ends; nothing blocks forever.

# Guarantees

  - Exactly once. Every mutating request carries the client's random id and
    a sequence number. When an answer is lost (timeout, broken connection)
    or the service answers with a retryable code (NotLeader, WrongShard,
    Unavailable, RangeMoving, Closed) the client resends the same request
    with the same sequence number, and the service returns the first
    outcome instead of applying it twice. A reentrant acquire retried after a
    timeout does not add a second hold; a release retried after the lock
    passed to someone else does not release the new holder. The one
    exception is a request parked in a lock or election queue: the service
    abandons it when its connection breaks, so the client sends it again
    with a new sequence number (it joins the queue again at the back).
  - Rate limits are waited out. A TooMany answer that carries a retry hint
    (its TTL, in ms: the service's request-rate limit) is resent, same
    sequence number, after that long plus up to a quarter more of jitter;
    when the hint ends after the caller's deadline the TooMany error is
    returned at once. TooMany without a hint (a lock, session or watch
    limit) is a decision and is returned.
  - Ambiguity is named. When the caller's context ends while a mutating
    request may have reached the service without an answer, the error
    matches both ErrAmbiguous and the context's error.
  - Typed errors. Errors from the service are *wire.Error values matching the
    sentinels re-exported here (ErrConflict, ErrNotHolder, ErrSessionExpired,
    ErrTimeout, ...) with errors.Is. IsRetryable classifies them.
  - Linearizable reads, unless a call asks for WithStale.
  - Fair locks. Waiters are granted in arrival order by the service; a
    release wakes only the waiters it grants.
  - A failed acquire leaves nothing held. An acquire whose caller stops
    waiting (its context or session ended), or whose answer was lost, is
    withdrawn (OpCancel): the service applies the withdrawal through its log
    and answers with the acquire's fate, also when the acquire itself has
    not reached it yet (it then takes nothing when it does), and a grant
    that raced is given back. When the service cannot answer in time (no
    quorum) the caller gets ErrAmbiguous and the client keeps withdrawing in
    the background, giving back whatever it finds; while the shard has a
    quorum a possible hold is gone within one session TTL of the error.
  - Success only on a live session. Lock, TryLock, Campaign, Acquire and
    LockAll report a grant only while the session is alive by the client's
    own clock; a grant that arrives after the session's local deadline is
    given back and the call fails with ErrSessionExpired.
  - The holder always knows. When the service ends a hold without the
    holder's doing (a revocation at its deadline, an admin's release,
    resign or hand-over, the session's expiry or revocation) it tells the
    client, pushed on each connection's hold stream and, for a notice a push
    missed, in the next keepalive answer: within one keepalive interval
    (TTL/3) at worst. The hold's context ends (context.Cause: a
    *HoldLostError, or the session's cause), IsHeld turns false, and Unlock
    or Release says the hold was lost.

# Sessions

A Session is a lease that the client keeps alive: it owns locks, queued
waiters, election candidacies and ephemeral keys, and when it ends they all
end. The client picks the lease id itself (random, top bit clear) and sends a
keepalive every TTL/3 (WithTTL, default 10 s; a TTL outside the bounds the
cluster names at the handshake, 1 s..600 s by default, is refused by
NewSession with a *TTLError before anything is sent). A Put with
WithLease(s) carries the session's TTL and lease key like its locks, so it
works on any shard. Its state follows Apache Curator's vocabulary:

	            keepalive fails or is overdue
	Connected ---------------------------------> Suspended
	    ^  <--------------------------------------   |
	    |          a keepalive is acknowledged       |
	    |                                            | no keepalive acknowledged
	    | the service reports the lease gone         | within TTL (local clock)
	    +------------------------------> Lost <------+
	Close / Client.Close ------------> Closed

The client counts the lease from the moment it sent the last keepalive that
was acknowledged, on the monotonic clock. The service counts it from when it
received that keepalive, which is later, so the client's view always ends
first: once the session is Lost locally, the service may still hold its locks
for a short while, but never the other way round. Suspended means "the lease
may be alive but this client cannot prove it": stop acting as lock holder or
leader until Connected again, unless every action is fenced.

Session.States delivers the changes on a channel without ever blocking the
session (the oldest changes are dropped when the reader falls behind).
Session.Done and Session.Context end when the session is Lost or Closed
(also at once when the service reports the lease ended). Mutex.Context,
RWMutex.Context and RContext, Permit.Context, MultiLock.Context and
Election.Context end when their hold ends: given back (cause ErrReleased),
ended by the service (a *HoldLostError naming path, token and cause), or
with the session (its cause, matching ErrSessionExpired). Lock.Context (a
lock without a session) ends the same ways, its own lease's expiry
included, counted on the client's clock from the send of the acquire or of
the last acknowledged Renew. Pass them to the work a lock guards.

# Fencing

A lock's token strictly increases across every grant of its path, across
leader changes, restarts and range moves. Leases can expire under a paused
process, so send the token with every write to the protected resource and
have the resource refuse tokens lower than the highest it has seen:

	s, _ := c.NewSession(ctx, client.WithTTL(10*time.Second))
	defer s.Close(context.Background())
	m := client.NewMutex(s, "/locks/billing/nightly")
	if err := m.Lock(ctx); err != nil {
		return err
	}
	defer m.Unlock(context.Background())
	// The storage refuses writes carrying a token below its high-water mark.
	return store.WriteIfNewer(m.Context(), report, m.Token())

# Locks without a session

Client.Acquire takes one lock with a lease of its own (a TTL, renewed with
Lock.Renew): useful for a lock that must outlive a process restart's
session, or for tools. Mutex and RWMutex use a session's lease and need no
renewal.

# Semaphores, multi-locks, revocation, lock-delay, elections

NewSemaphore gives N permits on a path: FIFO, each permit bound to the
session and fenced by its own token. A permit is a shared hold, so the
semaphore conflicts with exclusive locks on the path's ancestors and
descendants.

LockAll takes several paths all or nothing. It orders them globally (start
key of the serving range, then path), tries each shard's group as one atomic
command and, when it must wait, takes that group's paths one by one in the
same order; so two LockAll calls never deadlock each other, and a failure
releases everything already taken.

RevokeLock asks a holder to release within a grace period (any caller, on a
lock taken WithRevocable; ForceRevokeLock needs the admin permission and
works on any lock). The holder hears of it through Mutex.RevokeRequests (or
Client.RevokeRequests); if it still holds the lock at the deadline the
service revokes it, the hold's context ends (a *HoldLostError with cause
wire.CauseForced), and the next grant's token is higher, so fenced
resources refuse the old holder.

Lock-delay: after a lease expiry or a revocation the path is granted to
nobody for the lock's delay (WithLockDelay, or the cluster default); a try
gets ErrLockDelayed, LockInfo shows DelayUntil, and waiters are granted when
it ends. A graceful release starts none.

Elections: WithPriority ranks waiting candidates (a free leadership goes to
the highest priority; a leader is never preempted), and Election.HandOver
passes leadership to a named waiting candidate in one step, with no moment
without a leader.

A blocking acquire that would close a wait-for cycle inside a shard fails
with ErrDeadlock instead of waiting forever. Edges run between owners
(session lease + owner name): give the locks one unit of work takes the same
WithOwner so its waits are seen as one.

# Errors, per call, and the caller's state after each

Every call may also fail with ErrClientClosed (the client was closed:
nothing is held, its sessions are gone) and, when no endpoint answers before
ctx ends, with ctx's error (joined with ErrNoEndpoint or the last retryable
error: Unavailable, NotLeader, ... are retried until then).

Mutex.Lock, RWMutex.Lock and RLock, Semaphore.Acquire, Election.Campaign,
Client.Acquire (a session-less lock: no session errors) and LockAll:

  - nil: held (a leader for Campaign). Token is the fencing token; the
    hold's context is live.
  - ctx's error (context.Canceled, context.DeadlineExceeded): ctx ended
    first. Nothing is held: the wait was withdrawn and a grant that raced
    was given back.
  - an error matching both context.DeadlineExceeded and ErrTimeout: the
    service's wait (the time left before ctx's deadline) ran out first.
    Nothing is held.
  - an error matching ErrAmbiguous (and ctx's error): ctx ended and the
    withdrawal was not answered within the request timeout. The caller holds
    nothing; the client keeps withdrawing in the background and gives back
    a grant it turns up (see the guarantees above for how long a hold may
    remain in the service meanwhile).
  - ErrSessionExpired (ErrSessionClosed after Session.Close): the session
    ended before or during the wait, or the grant came after its local
    deadline and was given back. Nothing is held; the session is done.
  - ErrCancelled: the request was granted but the hold ended before the
    client learnt of it (revoked meanwhile), or it was withdrawn by another
    party naming it. Nothing is held.
  - ErrConflict: TryLock (TryRLock, TryAcquire, LockAll WithTry) found the
    path held, or this Mutex is held by this process; ErrLockDelayed: a try
    during the path's lock-delay. Nothing is held.
  - ErrDeadlock (waiting would close a wait-for cycle), ErrSelfConflict (the
    owner holds a conflicting lock above or below), ErrUpgradeConflict
    (RWMutex: shared to exclusive with other readers), ErrTooMany (a waiter
    or per-lease limit), ErrInvalidArgument (path, TTL, a semaphore of
    another size), ErrSpansRanges, ErrUnauthorized: refused; nothing is
    held, nothing queued.

LockAll takes a set all or nothing: on any of the errors above it has given
back every path it took.

Mutex.Unlock, RWMutex.Unlock and RUnlock, Permit.Release, MultiLock.Unlock,
Election.Resign and HandOver, Lock.Release:

  - nil: given back (HandOver: the successor leads). The context ends with
    ErrReleased.
  - ErrNotHolder, ErrStaleToken or ErrSessionExpired: the service had
    already ended the hold; the object no longer holds it. When the client
    was told why, the error matches ErrHoldLost too (the *HoldLostError).
  - ErrAmbiguous or ctx's error: not confirmed. The object still holds it;
    call again (a release by token never frees a later holder).
  - HandOver: ErrNotFound (no such candidate waits) or ErrInvalidArgument;
    the leadership is unchanged.

Election.Proclaim: nil, or ErrNotHolder/ErrStaleToken/ErrSessionExpired
(no longer leader: the election forgets its leadership), or ErrAmbiguous /
ctx's error (unknown; still leader as far as the client knows).

Lock.Renew: nil (the single-lock lease runs for ttl from now), or
ErrNotHolder/ErrStaleToken (the lock has ended; its Context ends), or the
*HoldLostError its Context ended with (nothing sent), or ErrAmbiguous /
ctx's error (unknown: renew again before the old TTL runs out).

Client.NewSession: nil, or the first keepalive's error (nothing exists).
Session.Close: nil (the lease and everything it held are gone, or the
session was already lost), or ErrAmbiguous / ctx's error (the revoke was not
confirmed: the lease expires one TTL after its last keepalive).

# Exactly-once retries, in detail

Every mutating call is numbered (Client.ID, a sequence number) and retried
with the same number on a retryable code, a timeout or a broken connection.
The service keeps the first outcome of each number, replicated and in
snapshots, until the client acknowledges it (AckSeq) or has been idle for ten
minutes, and answers any retry, on any node, with that outcome: a put's
version, a grant's token. A retried grant whose hold has ended since answers
ErrCancelled, never a dead token. Client.Do sends a request with a
caller-chosen Client and Seq unchanged, so an application that persists its
own numbering can retry across process restarts.

# Watches

Client.Watch streams events (grants and releases with their cause, KV
changes, leader changes) for a path or prefix, from now, from a revision
or from a Position. The stream survives reconnects: the client resubscribes
from where it stood, so nothing is lost or repeated.

A prefix watch follows any subtree, however shallow, on every shard at
once, across range moves. Each shard's events arrive in revision order;
there is no order between shards. Its Position, the last revision delivered
per shard, is in every WatchResponse (PositionAfter gives it after any one
event); WithWatchPosition resumes from it, in this process or another. A
start older than a shard's retained history ends the watch with a
*CompactedError (ErrCompacted) naming the shard and its oldest revision.

# Routing

By default the client reads the range table and each shard's leader from
the cluster (every 2 s, WithRouteRefresh to change it) and sends a request
on a path straight to the node that leads its shard. Any node still answers
correctly: one that forwards the request names the leader in its answer,
and the client sends the shard's next requests there. WithoutDirectRouting
sends everything through the given endpoints (a router tier).

# Tracing

WithTracer(tp.Tracer("myapp")) makes each call (an acquire with its wait,
a put, a release; retries included) one client span, a child of the span in
the call's context, and sends its W3C trace context in the request: the
router's spans and the shard's apply span join the same trace. Without it
nothing is traced and requests carry no trace context.

# Testing

Request timeouts use real time; the session's keepalive schedule and local
expiry use an injected clock inside the package's own tests, so they run
without sleeping for a TTL.
*/
package client
