package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/wardenlock/warden/internal/linmodel"
)

type savedOp struct {
	ClientId int
	Input    linmodel.RegInput
	Call     int64
	Output   linmodel.RegOutput
	Return   int64
}

// TestRecheckHistory re-checks a saved register history
// (WARDEN_CHAOS_HISTORY=path/register-history.json), partition by partition.
func TestRecheckHistory(t *testing.T) {
	path := os.Getenv("WARDEN_CHAOS_HISTORY")
	if path == "" {
		t.Skip("set WARDEN_CHAOS_HISTORY")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var saved []savedOp
	if err := json.Unmarshal(b, &saved); err != nil {
		t.Fatal(err)
	}
	var ops []porcupine.Operation
	for _, s := range saved {
		ops = append(ops, porcupine.Operation{ClientId: s.ClientId, Input: s.Input, Call: s.Call, Output: s.Output, Return: s.Return})
	}
	m := linmodel.RegisterModel()
	for _, part := range m.Partition(ops) {
		ns := ""
		for _, op := range part {
			if p := op.Input.(linmodel.RegInput).Path; p != "" {
				ns = linmodel.Namespace(p)
				break
			}
		}
		mm := m
		mm.Partition = nil
		res := porcupine.CheckOperationsTimeout(mm, part, time.Minute)
		fmt.Printf("partition %s: %d ops: %s\n", ns, len(part), res)
		if res == porcupine.Illegal {
			// The shortest failing prefix (by call order) is a hint, not a proof:
			// operations called later can make a prefix linearizable again.
			lo, hi := 1, len(part)
			for lo < hi {
				mid := (lo + hi) / 2
				if porcupine.CheckOperationsTimeout(mm, part[:mid], time.Minute) == porcupine.Illegal {
					hi = mid
				} else {
					lo = mid + 1
				}
			}
			fmt.Printf("  first failing prefix ends at op %d:\n", lo)
			for _, op := range part[max(0, lo-40):lo] {
				ret := "∞"
				if op.Return != linmodel.UnknownReturn {
					ret = fmt.Sprintf("%.3f", float64(op.Return)/1e9)
				}
				fmt.Printf("  c%d [%.3f, %s] %s\n", op.ClientId, float64(op.Call)/1e9, ret, m.DescribeOperation(op.Input, op.Output))
			}
		}
	}
}
