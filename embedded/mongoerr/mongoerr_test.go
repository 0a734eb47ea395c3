package mongoerr

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorNamesAndWrapping(t *testing.T) {
	tests := []struct {
		err      error
		code     int32
		codeName string
		text     string
	}{
		{New(DuplicateKey, "E11000 x"), DuplicateKey, "DuplicateKey", "(DuplicateKey) E11000 x"},
		{NotImplementedf("command '%s'", "eval"), NotImplemented, "NotImplemented", "(NotImplemented) embedded server does not implement command 'eval'"},
		{New(12345, "odd"), 12345, "Location12345", "(code 12345) odd"},
		{fmt.Errorf("wrapped: %w", BadValuef("bad")), BadValue, "BadValue", "(BadValue) bad"},
		{errors.New("plain"), InternalError, "InternalError", "(InternalError) plain"},
	}
	for _, tt := range tests {
		e := As(tt.err)
		if e.Code != tt.code || e.CodeName() != tt.codeName || e.Error() != tt.text {
			t.Errorf("As(%v) = code %d name %q text %q; want %d %q %q", tt.err, e.Code, e.CodeName(), e.Error(), tt.code, tt.codeName, tt.text)
		}
		if tt.code != InternalError && !Is(tt.err, tt.code) {
			t.Errorf("Is(%v, %d) = false", tt.err, tt.code)
		}
	}
	if Is(errors.New("x"), BadValue) {
		t.Error("Is matched a plain error")
	}
}
