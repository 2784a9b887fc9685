package wire

import "strconv"

// HexID is a 64-bit id shown as lower-case hex without leading zeros, the
// one form lease ids (and client ids) take in every output and document:
// the CLI's tables and JSON, the admin API, the status page, the audit
// trail. In JSON it is a string, since a decimal number above 2^53 loses
// digits in JavaScript.
type HexID uint64

func (h HexID) String() string { return strconv.FormatUint(uint64(h), 16) }

// MarshalText makes HexID a JSON string (and omitempty leaves out 0).
func (h HexID) MarshalText() ([]byte, error) { return strconv.AppendUint(nil, uint64(h), 16), nil }

// UnmarshalText reads the hex form.
func (h *HexID) UnmarshalText(b []byte) error {
	v, err := strconv.ParseUint(string(b), 16, 64)
	if err != nil {
		return err
	}
	*h = HexID(v)
	return nil
}
