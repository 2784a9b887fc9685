package wire

import (
	"encoding/binary"
	"fmt"
)

// checkClaims walks one msgpack value in b without decoding it and refuses
// any length that cannot fit in the bytes that are left: a str, bin or ext
// longer than the rest of the frame, or an array or map with more elements
// than bytes remain (every element takes at least one). The msgpack decoder
// sizes some allocations from these headers before reading (v5.4.1 makes a
// []byte of a bin's declared length), so a ten-byte frame could otherwise ask
// for gigabytes. The walk is iterative: nesting depth costs no stack.
func checkClaims(b []byte) error {
	// Every value in the body is walked, not only the first: the decoder
	// reads an ext header in front of a map as part of it.
	pending := 1 // values still to read
	i := 0
	for pending > 0 || i < len(b) {
		if pending == 0 {
			pending = 1 // the next top-level value
		}
		if i >= len(b) {
			return fmt.Errorf("wire: frame ends inside a value")
		}
		c := b[i]
		i++
		pending--
		var items, size int // array/map elements to add; bytes of payload to skip
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c&0xf0 == 0x80:
			items = 2 * int(c&0x0f)
		case c&0xf0 == 0x90:
			items = int(c & 0x0f)
		case c&0xe0 == 0xa0:
			size = int(c & 0x1f)
		case c == 0xc1:
			return fmt.Errorf("wire: byte 0xc1 is never used in msgpack")
		default:
			n, hdr, err := lengthOf(c, b[i:])
			if err != nil {
				return err
			}
			i += hdr
			switch c {
			case 0xdc, 0xdd:
				items = n
			case 0xde, 0xdf:
				items = 2 * n
			default:
				size = n
			}
		}
		if size > len(b)-i {
			return fmt.Errorf("wire: a value claims %d bytes but the frame has %d left", size, len(b)-i)
		}
		i += size
		if items > len(b)-i || pending+items > len(b)-i {
			return fmt.Errorf("wire: a list claims %d elements but the frame has %d bytes left", items, len(b)-i)
		}
		pending += items
	}
	return nil
}

// lengthOf reads the length that follows type byte c: for str/bin/ext the
// payload size (ext: plus its type byte), for fixed-size numbers and fixext
// their size, for arrays and maps the element count. hdr is how many bytes
// the length itself took.
func lengthOf(c byte, rest []byte) (n, hdr int, err error) {
	var w int
	switch c {
	case 0xcc, 0xd0:
		return 1, 0, nil
	case 0xcd, 0xd1, 0xd4:
		return 2, 0, nil
	case 0xd5:
		return 3, 0, nil
	case 0xca, 0xce, 0xd2:
		return 4, 0, nil
	case 0xd6:
		return 5, 0, nil
	case 0xcb, 0xcf, 0xd3:
		return 8, 0, nil
	case 0xd7:
		return 9, 0, nil
	case 0xd8:
		return 17, 0, nil
	case 0xc4, 0xc7, 0xd9:
		w = 1
	case 0xc5, 0xc8, 0xda, 0xdc, 0xde:
		w = 2
	case 0xc6, 0xc9, 0xdb, 0xdd, 0xdf:
		w = 4
	default:
		return 0, 0, fmt.Errorf("wire: unknown msgpack type byte 0x%02x", c)
	}
	if len(rest) < w {
		return 0, 0, fmt.Errorf("wire: frame ends inside a length")
	}
	switch w {
	case 1:
		n = int(rest[0])
	case 2:
		n = int(binary.BigEndian.Uint16(rest))
	default:
		n = int(binary.BigEndian.Uint32(rest))
	}
	if c >= 0xc7 && c <= 0xc9 {
		n++ // the ext type byte
	}
	return n, w, nil
}
