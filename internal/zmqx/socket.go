package zmqx

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"
)

// DialTimeout bounds one TCP connect attempt.
const DialTimeout = 5 * time.Second

// Dial creates a socket with newSocket (zmq4.NewSub, zmq4.NewDealer, ...),
// applies setup (options that must precede the connection; may be nil)
// and connects it once to endpoint through the guarded transport. The
// library's own retry and reconnect are off: callers run their own loop
// with backoff, so a lost connection surfaces as an error from Recv
// instead of being hidden. The socket lives until ctx ends or Close.
func Dial(ctx context.Context, newSocket func(context.Context, ...zmq4.Option) zmq4.Socket,
	endpoint string, log *slog.Logger, setup func(zmq4.Socket) error) (zmq4.Socket, error) {
	ep, err := Guarded(endpoint)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	s := newSocket(ctx,
		zmq4.WithDialerMaxRetries(0),
		zmq4.WithDialerTimeout(DialTimeout),
		zmq4.WithAutomaticReconnect(false),
		zmq4.WithLogger(slog.NewLogLogger(log.Handler(), slog.LevelDebug)),
	)
	if setup != nil {
		if err := setup(s); err != nil {
			s.Close()
			return nil, err
		}
	}
	if err := s.Dial(ep); err != nil {
		s.Close()
		return nil, unguarded(err)
	}
	return s, nil
}

// dialError is a dial failure whose message shows the endpoint as the
// user registered it: the guarded transport's scheme is an internal name
// (zmq4 routes by scheme), never something a user should see.
type dialError struct {
	msg string
	err error
}

func (e *dialError) Error() string { return e.msg }
func (e *dialError) Unwrap() error { return e.err }

func unguarded(err error) error {
	msg := strings.NewReplacer(schemeTCP+"://", "tcp://", schemeIPC+"://", "ipc://").Replace(err.Error())
	return &dialError{msg: msg, err: err}
}

// DialSub connects a SUB socket subscribed to every topic. The
// subscription is set before dialing, so zmq4 sends it as part of
// connection setup.
func DialSub(ctx context.Context, endpoint string, log *slog.Logger) (zmq4.Socket, error) {
	return Dial(ctx, zmq4.NewSub, endpoint, log, func(s zmq4.Socket) error {
		return s.SetOption(zmq4.OptionSubscribe, "")
	})
}

// PubQueue is how many messages a PUB socket queues for its subscribers
// (zmq4's high-water mark); past it zmq4 drops new messages, silently. A
// subscriber that stops reading (WriteTimeout) or keeps the writer waiting
// most of the time (guardConn.Write) is cut off, so the queue drains; only
// a burst of more messages than this, faster than the slowest subscriber
// still connected reads them, reaches the mark.
const PubQueue = 1024

// ListenPub binds a PUB socket on endpoint (tcp://host:port; port 0 picks
// one, see the socket's Addr) through the guarded transport: subscribers'
// frames are checked like any peer's, and a subscriber that stops reading
// is disconnected after WriteTimeout instead of stalling the others.
func ListenPub(ctx context.Context, endpoint string, log *slog.Logger) (zmq4.Socket, error) {
	ep, err := Guarded(endpoint)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	s := zmq4.NewPub(ctx, zmq4.WithLogger(slog.NewLogLogger(log.Handler(), slog.LevelDebug)))
	if err := s.SetOption(zmq4.OptionHWM, PubQueue); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.Listen(ep); err != nil {
		s.Close()
		return nil, unguarded(err)
	}
	return s, nil
}
