package main

import (
	"context"
	"time"

	"github.com/dropstream/dropstream/internal/benchstat"
)

// processCPU and redisCPU serve bench_comic.go until the comic bench
// moves into its flow's bench package, which uses package benchstat.
func processCPU() time.Duration { return benchstat.ProcessCPU() }

func redisCPU(ctx context.Context, a *app) time.Duration { return benchstat.RedisCPU(ctx, a.rdb) }
