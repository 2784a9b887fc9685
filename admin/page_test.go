package admin

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/control"
	"github.com/wardenlock/warden/internal/cpuload"
	"github.com/wardenlock/warden/router"
)

// The page shows each node's CPU and, on the meta leader, the shard
// policy's verdict; a node without a reading shows a dash.
func TestPageShowsCPUAndPolicy(t *testing.T) {
	at := time.Date(2026, 11, 29, 1, 2, 3, 0, time.UTC)
	d := pageData{Now: at, Status: Status{Node: 1,
		Nodes: []NodeInfo{
			{ID: 1, Self: true, Liveness: router.Liveness{State: router.NodeUp, LastHeard: at, CPU: &cpuload.Reading{Used: 0.1, Capacity: 0.25}}},
			{ID: 2, Liveness: router.Liveness{State: router.NodeUp, LastHeard: at}},
		},
		ShardPolicy: &control.PolicyState{At: at, Enabled: true, Verdict: "node 1 is saturated and no other node has room"},
	}}
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, d); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`<td class="num cpu">40% of 0.25 cores</td>`,
		`<td class="num cpu">–</td>`,
		`Shard policy (on, read 2026-11-29T01:02:03Z): node 1 is saturated and no other node has room`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
