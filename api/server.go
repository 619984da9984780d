package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/gofiber/fiber/v2"
)

// ErrServerStarted is returned by [Server.Serve] and [Server.Listen] when the
// server has already been started: a Server serves at most once.
var ErrServerStarted = errors.New("api: server already started")

// Server is dropstream's HTTP API server: [New], add routes, then
// [Server.Listen] or [Server.Serve]. Its methods are safe for concurrent
// use; routes must not be added once serving has begun.
type Server struct {
	cfg     Config // with defaults applied
	log     *slog.Logger
	keys    keyring
	app     *fiber.App
	limiter *limiter // nil when disabled

	listening chan struct{} // closed once bound to a listener
	spec      openAPI       // operations registered with Handle

	mu      sync.Mutex
	started bool         // Serve was called
	ln      net.Listener // the listener being served, once started
}

// New validates cfg, applies its defaults and returns a Server with the
// middleware chain and the operational routes installed. It warns when no
// API keys leave the API open.
func New(cfg Config) (*Server, error) {
	keys, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, log: cfg.Logger, keys: keys, listening: make(chan struct{})}
	if !cfg.RateLimit.Disabled {
		s.limiter = newLimiter(cfg.RateLimit)
	}
	s.app = fiber.New(fiber.Config{
		AppName:               "dropstream",
		BodyLimit:             cfg.BodyLimit,
		ReadTimeout:           cfg.ReadTimeout,
		WriteTimeout:          cfg.WriteTimeout,
		IdleTimeout:           cfg.IdleTimeout,
		ErrorHandler:          s.handleError,
		DisableStartupMessage: true,
		// Strings from c.Params, c.Query, c.Get... stay valid after the
		// request; without it Fiber reuses their memory.
		Immutable: true,
	})
	s.app.Use(requestIDMiddleware, s.tracingMiddleware(), s.accessLogMiddleware, s.recoverMiddleware, csrfMiddleware)
	s.registerOperationalRoutes()

	if keys.open() {
		s.log.Warn("API is open: DROPSTREAM_API_KEYS is empty, every route accepts unauthenticated requests; " +
			"set it to \"key:scope,...;key2:scope\" (scopes read, write, admin) to require API keys")
	}
	return s, nil
}

// App returns the underlying Fiber app, for tests (app.Test) and for routes
// that need no API key. Prefer [Server.Group] for feature routes.
func (s *Server) App() *fiber.App { return s.app }

// Listen listens on Config.Addr and serves as [Server.Serve]. [Server.Addr]
// gives the bound address once [Server.Listening] is closed.
func (s *Server) Listen(ctx context.Context) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("api: listen on %s: %w", s.cfg.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln, which it owns, until ctx is cancelled, then waits up
// to Config.ShutdownTimeout for in-flight requests. It returns nil after a
// clean shutdown, an error wrapping context.DeadlineExceeded if requests
// outlived it, [ErrServerStarted] on a second call, or the serving error.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		_ = ln.Close()
		return ErrServerStarted
	}
	s.started = true
	s.ln = ln
	s.mu.Unlock()
	close(s.listening)

	addr := ln.Addr().String()
	s.log.Info("api: listening", slog.String("addr", addr))
	errc := make(chan error, 1)
	go func() { errc <- s.app.Listener(ln) }()

	select {
	case err := <-errc: // the listener failed
		if err != nil {
			return fmt.Errorf("api: serve on %s: %w", addr, err)
		}
		return nil
	case <-ctx.Done():
	}

	s.log.Info("api: shutting down", slog.String("addr", addr), slog.Duration("timeout", s.cfg.ShutdownTimeout))
	shutdownErr := s.app.ShutdownWithTimeout(s.cfg.ShutdownTimeout)
	// If the shutdown ran before fasthttp registered ln, it did nothing;
	// closing ln makes the accept loop end cleanly in that case.
	_ = ln.Close()
	serveErr := <-errc
	if shutdownErr != nil {
		return fmt.Errorf("api: shutdown: %w", shutdownErr)
	}
	if serveErr != nil {
		return fmt.Errorf("api: serve on %s: %w", addr, serveErr)
	}
	return nil
}

// Listening returns a channel closed once the server is bound. It is never
// closed if Listen fails to bind: wait on it with Listen's result.
func (s *Server) Listening() <-chan struct{} { return s.listening }

// Addr returns the address the server listens on ("127.0.0.1:41234"), or ""
// before it has started listening.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}
