package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/gameops/rollup/api/apiv1"
)

// fallbackPattern matches every request no route of s.mux matches.
const fallbackPattern = "/"

// probeMethods are the methods a 405's Allow header may list, in its order.
var probeMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions,
}

// routeFallback answers, with the JSON error schema, what net/http's mux would answer in
// text/plain: 404 not_found for a path no route has, 405 method_not_allowed (with Allow) for a
// path that routes other methods. Its pattern is the least specific, so it gets only the
// requests no other route of s.mux matches, whenever those are registered.
func (s *Server) routeFallback() {
	s.mux.HandleFunc(fallbackPattern, func(w http.ResponseWriter, r *http.Request) {
		var allowed []string
		for _, m := range probeMethods {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, p := s.mux.Handler(probe); p != fallbackPattern && p != "" {
				allowed = append(allowed, m)
			}
		}
		if len(allowed) == 0 {
			s.fail(w, &httpError{status: http.StatusNotFound, body: apiv1.ErrorResponse{
				Error:   apiv1.ErrNotFound,
				Message: fmt.Sprintf("no endpoint at %s; the API's paths are in docs/openapi.yaml", r.URL.Path),
			}})
			return
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		s.fail(w, &httpError{status: http.StatusMethodNotAllowed, body: apiv1.ErrorResponse{
			Error:   apiv1.ErrMethodNotAllowed,
			Message: fmt.Sprintf("%s does not take %s; use %s", r.URL.Path, r.Method, strings.Join(allowed, " or ")),
		}})
	})
}
