package storage

import "runtime"

func runtimeGosched() { runtime.Gosched() }
