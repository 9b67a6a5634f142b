// A Go client of the Covel scheduler, written from the protos alone (tests/polyglot/test_go_client.py
// generates the stubs with protoc-gen-go and protoc-gen-go-grpc, then runs it against the five services).
// It creates a session, plays each action given on the command line, reads the streamed story, lists the
// recorded turns a page at a time, and prints one JSON summary; an error's google.rpc details are decoded.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	schedulerv1 "covel.dev/api/gen/go/covel/scheduler/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

type playedTurn struct {
	TurnID string `json:"turn_id"`
	Status string `json:"status"`
	Story  string `json:"story"`
	Events int    `json:"events"`
}

type summary struct {
	SessionID   string       `json:"session_id"`
	Turns       []playedTurn `json:"turns"`
	Listed      int          `json:"listed"`
	Pages       int          `json:"pages"`
	Error       string       `json:"error,omitempty"`
	ErrorReason string       `json:"error_reason,omitempty"`
	Violations  []string     `json:"field_violations,omitempty"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50150", "the scheduler's address")
	flag.Parse()
	conn, err := grpc.Dial(*addr, grpc.WithInsecure(), grpc.WithBlock(), grpc.WithTimeout(20*time.Second))
	if err != nil {
		fail(err)
	}
	defer conn.Close()
	client := schedulerv1.NewSchedulerClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if token := os.Getenv("COVEL_API_TOKEN"); token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	// EXCLUDED_PLUGINS: plugin ids separated by commas; unset or empty excludes none.
	created, err := client.CreateSession(ctx, &schedulerv1.CreateSessionRequest{ExcludedPlugins: strings.FieldsFunc(os.Getenv("EXCLUDED_PLUGINS"),
		func(r rune) bool { return r == ',' })})
	if err != nil {
		fail(err)
	}
	out := summary{SessionID: created.GetSession().GetId()}
	for _, text := range flag.Args() {
		out.Turns = append(out.Turns, play(ctx, client, out.SessionID, text))
	}
	token := ""
	for {
		page, err := client.ListTurns(ctx, &schedulerv1.ListTurnsRequest{SessionId: out.SessionID, PageSize: 1, PageToken: token})
		if err != nil {
			fail(err)
		}
		out.Listed += len(page.GetTurns())
		out.Pages++
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	// A mistake on purpose: an empty action list names its field in BadRequest.
	_, err = client.SubmitActions(ctx, &schedulerv1.SubmitActionsRequest{SessionId: out.SessionID})
	if err == nil {
		stream, _ := client.SubmitActions(ctx, &schedulerv1.SubmitActionsRequest{SessionId: out.SessionID})
		_, err = stream.Recv()
	}
	describe(&out, err)
	encoded, _ := json.Marshal(out)
	fmt.Println(string(encoded))
}

func play(ctx context.Context, client schedulerv1.SchedulerClient, sessionID, text string) playedTurn {
	stream, err := client.SubmitActions(ctx, &schedulerv1.SubmitActionsRequest{
		SessionId: sessionID, Actions: []*schedulerv1.PlayerAction{{Kind: "act", Text: text}}})
	if err != nil {
		fail(err)
	}
	var story strings.Builder
	played := playedTurn{}
	for {
		event, err := stream.Recv()
		if err == io.EOF {
			return played
		}
		if err != nil {
			fail(err)
		}
		played.Events++
		if delta := event.GetNarrativeDelta(); delta != nil {
			story.WriteString(delta.GetText())
		}
		if turn := event.GetTurnCompleted(); turn != nil {
			played.TurnID, played.Status, played.Story = turn.GetId(), schedulerv1.TurnStatus_name[int32(turn.GetStatus())], story.String()
		}
	}
}

func describe(out *summary, err error) {
	if err == nil {
		return
	}
	st, _ := status.FromError(err)
	out.Error = st.Code().String()
	for _, detail := range st.Details() {
		switch found := detail.(type) {
		case *errdetails.BadRequest:
			for _, violation := range found.GetFieldViolations() {
				out.Violations = append(out.Violations, violation.GetField())
			}
		case *errdetails.ErrorInfo:
			out.ErrorReason = found.GetReason()
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "covel go client:", err)
	os.Exit(1)
}
