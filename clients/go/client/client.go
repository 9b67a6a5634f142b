// Package client is a client of the Covel scheduler's public API (covel.scheduler.v1) with the retry rules of
// the kernel's docs/retries.md: a read is sent again while the service is UNAVAILABLE (up to 3 more times, 0.1 s
// to 1 s apart); a turn (SubmitActions) is sent again, with the same idempotency key, while the error says a retry
// may pass (RetryInfo: the session busy, the queue full, a passing failure; or UNAVAILABLE) and no event came yet,
// within Options.RetryFor. Any other failure is an *Error with the server's details decoded.
package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"time"

	schedulerv1 "covel.dev/api/gen/go/covel/scheduler/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

const readRetries = 3

// Options: Token for a stack that asks for one (COVEL_API_TOKEN or a player's OIDC token); CAFile (and
// ServerName) for a scheduler that serves TLS; RetryFor bounds a turn's retries (default 30 s).
type Options struct {
	Token      string
	CAFile     string
	ServerName string
	RetryFor   time.Duration
}

// Client holds one connection to the scheduler. Stub is the generated client, for every other RPC.
type Client struct {
	Stub     schedulerv1.SchedulerClient
	conn     *grpc.ClientConn
	token    string
	retryFor time.Duration
}

// Dial connects to the scheduler at addr ("host:port"); the connection is made on the first call.
func Dial(addr string, opts Options) (*Client, error) {
	transport := grpc.WithInsecure() //nolint:staticcheck // the kernel's dev stack serves plaintext; CAFile for TLS
	if opts.CAFile != "" {
		tls, err := credentials.NewClientTLSFromFile(opts.CAFile, opts.ServerName)
		if err != nil {
			return nil, err
		}
		transport = grpc.WithTransportCredentials(tls)
	}
	conn, err := grpc.Dial(addr, transport)
	if err != nil {
		return nil, err
	}
	retryFor := opts.RetryFor
	if retryFor == 0 {
		retryFor = 30 * time.Second
	}
	return &Client{Stub: schedulerv1.NewSchedulerClient(conn), conn: conn, token: opts.Token, retryFor: retryFor}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Context is ctx with the client's token, for calls made through Stub.
func (c *Client) Context(ctx context.Context) context.Context {
	if c.token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.token)
}

func (c *Client) read(ctx context.Context, call func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		err := call(c.Context(ctx))
		if err == nil {
			return nil
		}
		failed := ErrorOf(err)
		if failed.Code != codes.Unavailable || attempt == readRetries {
			return failed
		}
		wait := time.Duration(100<<attempt) * time.Millisecond
		if wait > time.Second {
			wait = time.Second
		}
		if err := sleep(ctx, wait); err != nil {
			return failed
		}
	}
}

// CreateSession makes a new session (sent once: a repeat would make a second one). A nil request is the default one.
func (c *Client) CreateSession(ctx context.Context, request *schedulerv1.CreateSessionRequest) (*schedulerv1.Session, error) {
	if request == nil {
		request = &schedulerv1.CreateSessionRequest{}
	}
	reply, err := c.Stub.CreateSession(c.Context(ctx), request)
	if err != nil {
		return nil, ErrorOf(err)
	}
	return reply.GetSession(), nil
}

// GetSession reads a session.
func (c *Client) GetSession(ctx context.Context, sessionID string) (*schedulerv1.Session, error) {
	var session *schedulerv1.Session
	err := c.read(ctx, func(ctx context.Context) error {
		reply, err := c.Stub.GetSession(ctx, &schedulerv1.GetSessionRequest{SessionId: sessionID})
		session = reply.GetSession()
		return err
	})
	return session, err
}

// Turns calls each with the session's recorded turns, oldest first, reading them a page at a time.
func (c *Client) Turns(ctx context.Context, sessionID string, pageSize int32, each func(*schedulerv1.Turn) error) error {
	token := ""
	for {
		var page *schedulerv1.ListTurnsResponse
		err := c.read(ctx, func(ctx context.Context) (err error) {
			page, err = c.Stub.ListTurns(ctx, &schedulerv1.ListTurnsRequest{SessionId: sessionID, PageSize: pageSize, PageToken: token})
			return err
		})
		if err != nil {
			return err
		}
		for _, turn := range page.GetTurns() {
			if err := each(turn); err != nil {
				return err
			}
		}
		if token = page.GetNextPageToken(); token == "" {
			return nil
		}
	}
}

// Submit plays one turn: each gets its events as they come (the stream sends those ready together as one batch;
// each gets them one by one, never a batch). It is sent again with the same idempotency key while a retry may pass
// and no event came yet; a failure after the first event is returned (the turn's record then says what happened).
func (c *Client) Submit(ctx context.Context, sessionID string, action *schedulerv1.PlayerAction, each func(*schedulerv1.TurnEvent) error) error {
	request := &schedulerv1.SubmitActionsRequest{SessionId: sessionID, IdempotencyKey: newKey(), Actions: []*schedulerv1.PlayerAction{action},
		BatchEvents: true}
	giveUp := time.Now().Add(c.retryFor)
	for {
		started, err := c.submitOnce(ctx, request, each)
		if err == nil {
			return nil
		}
		failed := ErrorOf(err)
		wait, retried := retryWait(failed)
		if started || !retried || time.Now().Add(wait).After(giveUp) {
			return failed
		}
		if err := sleep(ctx, wait); err != nil {
			return failed
		}
	}
}

func (c *Client) submitOnce(ctx context.Context, request *schedulerv1.SubmitActionsRequest, each func(*schedulerv1.TurnEvent) error) (bool, error) {
	stream, err := c.Stub.SubmitActions(c.Context(ctx), request)
	if err != nil {
		return false, err
	}
	started := false
	for {
		event, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return started, nil
		}
		if err != nil {
			return started, err
		}
		started = true
		for _, one := range EventsOf(event) {
			if err := each(one); err != nil {
				return true, err
			}
		}
	}
}

// EventsOf gives the events one message of a turn stream carries: a batch's (a request's BatchEvents), or the
// message itself.
func EventsOf(message *schedulerv1.TurnEvent) []*schedulerv1.TurnEvent {
	if batch := message.GetBatch(); batch != nil {
		return batch.GetEvents()
	}
	return []*schedulerv1.TurnEvent{message}
}

// Play plays one action ("act") to the turn's end and gives its record (status, story, trace).
func (c *Client) Play(ctx context.Context, sessionID, text string) (*schedulerv1.Turn, error) {
	var completed *schedulerv1.Turn
	err := c.Submit(ctx, sessionID, &schedulerv1.PlayerAction{Kind: "act", Text: text}, func(event *schedulerv1.TurnEvent) error {
		if turn := event.GetTurnCompleted(); turn != nil {
			completed = turn
		}
		return nil
	})
	if err == nil && completed == nil {
		err = &Error{Code: codes.Unknown, Message: "the turn's stream ended without its record"}
	}
	return completed, err
}

// retryWait: how long to wait before sending a turn again, and whether a retry may pass at all.
func retryWait(failed *Error) (time.Duration, bool) {
	switch failed.Code {
	case codes.Unavailable, codes.Aborted, codes.ResourceExhausted:
	default:
		return 0, false
	}
	if failed.RetryAfter != nil {
		return *failed.RetryAfter, true
	}
	return time.Second, failed.Code == codes.Unavailable
}

func sleep(ctx context.Context, wait time.Duration) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

func newKey() string {
	var key [16]byte
	_, _ = rand.Read(key[:])
	return hex.EncodeToString(key[:])
}
