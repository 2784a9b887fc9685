package shard

import (
	"context"
	"errors"

	"github.com/lni/dragonboat/v4"

	"github.com/wardenlock/warden/wire"
)

// ErrorResponse turns a dragonboat or context error into a typed response.
// mutating says whether the request may have been applied anyway.
func ErrorResponse(id uint64, err error, mutating bool) *wire.Response {
	var we *wire.Error
	if errors.As(err, &we) {
		return &wire.Response{ID: id, Code: we.Code, Msg: we.Detail}
	}
	code := wire.Unavailable
	switch {
	case errors.Is(err, dragonboat.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		if mutating {
			code = wire.Ambiguous
		} else {
			code = wire.Timeout
		}
	case errors.Is(err, dragonboat.ErrShardClosed), errors.Is(err, dragonboat.ErrClosed):
		code = wire.Closed
	case errors.Is(err, dragonboat.ErrShardNotFound):
		code = wire.WrongShard
	case errors.Is(err, dragonboat.ErrPayloadTooBig):
		code = wire.TooLarge
	}
	return &wire.Response{ID: id, Code: code, Msg: err.Error()}
}
