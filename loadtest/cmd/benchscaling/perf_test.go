package main

import (
	"reflect"
	"testing"
)

// perf stat -x , prints count,unit,event,...; counters it could not read
// and anything that is not a count line are skipped.
func TestParsePerfStat(t *testing.T) {
	out := "# started on Sun Nov 22\n\n" +
		"109,,raw_syscalls:sys_enter,1044390,100.00,,\n" +
		"<not counted>,,syscalls:sys_enter_fdatasync,0,0.00,,\n" +
		"1,,sched:sched_switch,1044390,100.00,,\n" +
		"garbage\n"
	got := parsePerfStat(out)
	want := []perfCount{{"raw_syscalls:sys_enter", 109}, {"sched:sched_switch", 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
