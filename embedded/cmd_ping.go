package embedded

import "context"

func cmdPing(context.Context, *Server, *request) (result, error) { return result{}, nil }
