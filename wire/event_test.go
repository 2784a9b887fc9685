package wire

import "testing"

func TestTellsHolder(t *testing.T) {
	const session, single = 5, 1<<63 | 5
	for _, tc := range []struct {
		name string
		ev   Event
		want bool
	}{
		{"revoked at its deadline", Event{Kind: EvReleased, Cause: CauseForced, Lease: session}, true},
		{"released by another client", Event{Kind: EvReleased, Cause: CauseReleased, Lease: session, Client: 3}, true},
		{"resigned by another client", Event{Kind: EvReleased, Cause: CauseResigned, Lease: session, Client: 3}, true},
		{"handed over by another client", Event{Kind: EvReleased, Cause: CauseHandover, Lease: session, Client: 3}, true},
		{"the session lease ended", Event{Kind: EvLeaseEnd, Cause: CauseExpired, Lease: session}, true},
		{"released by the holder", Event{Kind: EvReleased, Cause: CauseReleased, Lease: session}, false},
		{"handed over by the leader", Event{Kind: EvReleased, Cause: CauseHandover, Lease: session}, false},
		{"ended with its lease", Event{Kind: EvReleased, Cause: CauseExpired, Lease: session}, false},
		{"moved with its range", Event{Kind: EvReleased, Cause: CauseMoved, Lease: session}, false},
		{"a single-lock lease revoked at its deadline", Event{Kind: EvReleased, Cause: CauseForced, Lease: single}, true},
		{"a single-lock lease expired", Event{Kind: EvReleased, Cause: CauseExpired, Lease: single}, true},
		{"a single-lock lease revoked", Event{Kind: EvReleased, Cause: CauseRevoked, Lease: single}, true},
		{"a single-lock lease released by another client", Event{Kind: EvReleased, Cause: CauseReleased, Lease: single, Client: 3}, true},
		{"a single-lock lease released by its holder", Event{Kind: EvReleased, Cause: CauseReleased, Lease: single}, false},
		{"a single-lock lease moved with its range", Event{Kind: EvReleased, Cause: CauseMoved, Lease: single}, false},
		{"a single-lock lease's end (its release told)", Event{Kind: EvLeaseEnd, Cause: CauseExpired, Lease: single}, false},
		{"a lease that moved with its range", Event{Kind: EvLeaseEnd, Cause: CauseMoved, Lease: session}, false},
		{"a grant", Event{Kind: EvAcquired, Cause: CauseHandOff, Lease: session, Client: 3}, false},
		{"a withdrawn waiter", Event{Kind: EvDequeued, Cause: CauseCancelled, Lease: session, Client: 3}, false},
	} {
		if got := tc.ev.TellsHolder(); got != tc.want {
			t.Errorf("%s: TellsHolder %v, want %v", tc.name, got, tc.want)
		}
	}
}
