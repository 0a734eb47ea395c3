package embedded

import "context"

func cmdKillAllSessions(_ context.Context, s *Server, _ *request) (result, error) {
	s.sessions.endAll()
	return result{}, nil
}
