package simulator

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/dropstream/dropstream/internal/tick"
)

// Start serves the simulator on addr until ctx ends and returns its base
// URL once listening; with Config.AutoTick it also ticks the model.
func (s *Simulator) Start(ctx context.Context, addr string) (string, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("simulator: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}
	go func() { _ = srv.Serve(ln) }() // Serve closes ln when it returns
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if s.cfg.AutoTick > 0 {
		go tick.EveryAfter(ctx, s.cfg.AutoTick, func() { s.Advance(1) })
	}
	return "http://" + ln.Addr().String(), nil
}
