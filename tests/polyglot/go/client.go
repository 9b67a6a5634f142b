// A Go program using the Covel Go module (covel.dev/api, `make clients`): tests/polyglot/test_go_client.py
// resolves the module through the proxy `make clients` writes, builds this, and runs it against the five services.
// It creates a session, plays each action given on the command line with the module's client (its retry rules),
// reads the streamed story, lists the recorded turns a page at a time, and prints one JSON summary; a failed call's
// google.rpc details are decoded by client.ErrorOf.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"covel.dev/api/client"
	schedulerv1 "covel.dev/api/gen/go/covel/scheduler/v1"
)

type playedTurn struct {
	TurnID string `json:"turn_id"`
	Status string `json:"status"`
	Story  string `json:"story"`
	Events int    `json:"events"`
	// Events the client gave that were batches (it opens them: none).
	Batches int `json:"batches"`
}

type summary struct {
	SessionID   string       `json:"session_id"`
	Turns       []playedTurn `json:"turns"`
	Listed      int          `json:"listed"`
	Pages       int          `json:"pages"`
	Error       string       `json:"error,omitempty"`
	ErrorReason string       `json:"error_reason,omitempty"`
	Violations  []string     `json:"field_violations,omitempty"`
	Missing     string       `json:"missing,omitempty"`
	// A turn streamed through the generated stub asking for batches: its messages, how many were batches and the
	// events client.EventsOf found in them.
	RawMessages int `json:"raw_messages"`
	RawBatches  int `json:"raw_batches"`
	RawEvents   int `json:"raw_events"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50150", "the scheduler's address")
	flag.Parse()
	covel, err := client.Dial(*addr, client.Options{Token: os.Getenv("COVEL_API_TOKEN")})
	if err != nil {
		fail(err)
	}
	defer covel.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// EXCLUDED_PLUGINS: plugin ids separated by commas; unset or empty excludes none.
	excluded := strings.FieldsFunc(os.Getenv("EXCLUDED_PLUGINS"), func(r rune) bool { return r == ',' })
	session, err := covel.CreateSession(ctx, &schedulerv1.CreateSessionRequest{ExcludedPlugins: excluded})
	if err != nil {
		fail(err)
	}
	out := summary{SessionID: session.GetId()}
	for _, text := range flag.Args() {
		out.Turns = append(out.Turns, play(ctx, covel, out.SessionID, text))
	}
	// The module reads a page at a time; count the pages through the generated stub's own paging too.
	token := ""
	for {
		page, err := covel.Stub.ListTurns(covel.Context(ctx), &schedulerv1.ListTurnsRequest{SessionId: out.SessionID, PageSize: 1, PageToken: token})
		if err != nil {
			fail(err)
		}
		out.Pages++
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	if err := covel.Turns(ctx, out.SessionID, 1, func(*schedulerv1.Turn) error { out.Listed++; return nil }); err != nil {
		fail(err)
	}
	rawTurn(ctx, covel, &out)
	// A mistake on purpose: an empty action list names its field in BadRequest.
	stream, err := covel.Stub.SubmitActions(covel.Context(ctx), &schedulerv1.SubmitActionsRequest{SessionId: out.SessionID})
	if err == nil {
		_, err = stream.Recv()
	}
	describe(&out, client.ErrorOf(err))
	if _, err := covel.GetSession(ctx, "no-such-session"); err != nil {
		if missing := client.ErrorOf(err); missing.Resource != nil {
			out.Missing = missing.Reason + " " + missing.Resource.Type + "/" + missing.Resource.Name
		}
	}
	encoded, _ := json.Marshal(out)
	fmt.Println(string(encoded))
}

func play(ctx context.Context, covel *client.Client, sessionID, text string) playedTurn {
	var story strings.Builder
	played := playedTurn{}
	err := covel.Submit(ctx, sessionID, &schedulerv1.PlayerAction{Kind: "act", Text: text}, func(event *schedulerv1.TurnEvent) error {
		played.Events++
		if event.GetBatch() != nil {
			played.Batches++
		}
		if delta := event.GetNarrativeDelta(); delta != nil {
			story.WriteString(delta.GetText())
		}
		if turn := event.GetTurnCompleted(); turn != nil {
			played.TurnID, played.Status, played.Story = turn.GetId(), schedulerv1.TurnStatus_name[int32(turn.GetStatus())], story.String()
		}
		return nil
	})
	if err != nil {
		fail(err)
	}
	return played
}

func rawTurn(ctx context.Context, covel *client.Client, out *summary) {
	stream, err := covel.Stub.SubmitActions(covel.Context(ctx), &schedulerv1.SubmitActionsRequest{SessionId: out.SessionID, BatchEvents: true,
		Actions: []*schedulerv1.PlayerAction{{Kind: "act", Text: "I wait."}}})
	if err != nil {
		fail(err)
	}
	for {
		message, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			fail(err)
		}
		out.RawMessages++
		if message.GetBatch() != nil {
			out.RawBatches++
		}
		out.RawEvents += len(client.EventsOf(message))
	}
}

func describe(out *summary, failed *client.Error) {
	if failed == nil {
		return
	}
	out.Error, out.ErrorReason = failed.Code.String(), failed.Reason
	for _, violation := range failed.FieldViolations {
		out.Violations = append(out.Violations, violation.Field)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "covel go client:", err)
	os.Exit(1)
}
