package main

import (
	"context"
	"fmt"
)

func runMongod(_ context.Context, _ *env, _ []string) error {
	return fmt.Errorf("mongod: not wired yet")
}
