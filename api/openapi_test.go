package api

import (
	"os"
	"strings"
	"testing"

	"github.com/gameops/rollup/api/apiv1"
)

// TestOpenAPIDocumentsEveryCode guards docs/openapi.yaml against drifting from the code: every
// error code, status and JSON field name the API answers with is documented.
func TestOpenAPIDocumentsEveryCode(t *testing.T) {
	data, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, s := range []string{
		apiv1.ErrMalformedJSON, apiv1.ErrInvalidRequest, apiv1.ErrInvalidItem, apiv1.ErrUnauthorized,
		apiv1.ErrForbidden, apiv1.ErrUnknownProject, apiv1.ErrBodyTooLarge, apiv1.ErrTooManyItems,
		apiv1.ErrOutOfWindow, apiv1.ErrUnavailable, apiv1.ErrInternal,
		apiv1.ErrMalformedBody, apiv1.ErrRequestTimeout, apiv1.ErrUnsupportedMediaType, apiv1.ErrRateLimited, `"429":`,
		`"408":`, `"415":`, "Content-Encoding", "Accept-Encoding", "curl --json", "charset=utf-8", "-0", "position counted in characters",
		string(apiv1.StatusApplied), string(apiv1.StatusStale), string(apiv1.StatusRejected),
		`"200":`, `"400":`, `"401":`, `"403":`, `"404":`, `"413":`, `"422":`, `"500":`, `"503":`,
		"Retry-After", apiv1.CountsPath + ":",
		"submission_id:", "observed_at:", "retry_after_seconds:", "resend_safe:", "summary:", "version:",
	} {
		if !strings.Contains(doc, s) {
			t.Errorf("docs/openapi.yaml does not mention %q", s)
		}
	}
}
