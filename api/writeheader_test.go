package api

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// TestWriteHeader checks that writeHeader sends what Header.Set sends, and that the shared
// header values survive a later Add.
func TestWriteHeader(t *testing.T) {
	want := http.Header{}
	want.Set("Content-Type", "application/json")
	want.Set("Cache-Control", "no-store")

	rec := httptest.NewRecorder()
	writeHeader(rec, http.StatusTeapot)
	if rec.Code != http.StatusTeapot {
		t.Fatalf("status %d, want %d", rec.Code, http.StatusTeapot)
	}
	if got := rec.Result().Header; !reflect.DeepEqual(got, want) {
		t.Fatalf("sent headers %v, want %v", got, want)
	}

	rec = httptest.NewRecorder()
	writeHeader(rec, http.StatusOK)
	rec.Header().Add("Cache-Control", "private")
	rec.Header().Add("Content-Type", "text/plain")
	if len(contentTypeJSON) != 1 || contentTypeJSON[0] != "application/json" ||
		len(cacheNoStore) != 1 || cacheNoStore[0] != "no-store" {
		t.Fatalf("shared values changed: %q %q", contentTypeJSON, cacheNoStore)
	}
	rec = httptest.NewRecorder()
	writeHeader(rec, http.StatusOK)
	if got := rec.Result().Header; !reflect.DeepEqual(got, want) {
		t.Fatalf("after Add on an earlier answer: sent headers %v, want %v", got, want)
	}
}
