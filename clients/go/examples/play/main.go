// Play a session from Go: `go run covel.dev/api/examples/play 127.0.0.1:50150 "I open the door."` (the services
// running, e.g. `make run` in the kernel's repository; with a token: COVEL_API_TOKEN=... go run ...).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"covel.dev/api/client"
	schedulerv1 "covel.dev/api/gen/go/covel/scheduler/v1"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: play ADDR [ACTION ...]")
		os.Exit(2)
	}
	if err := play(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "play:", err)
		os.Exit(1)
	}
}

func play(addr string, actions []string) error {
	covel, err := client.Dial(addr, client.Options{Token: os.Getenv("COVEL_API_TOKEN")})
	if err != nil {
		return err
	}
	defer covel.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	excluded := strings.FieldsFunc(os.Getenv("EXCLUDED_PLUGINS"), func(r rune) bool { return r == ',' })
	session, err := covel.CreateSession(ctx, &schedulerv1.CreateSessionRequest{ExcludedPlugins: excluded})
	if err != nil {
		return err
	}
	fmt.Printf("session %s\n", session.GetId())
	if len(actions) == 0 {
		actions = []string{"I look around."}
	}
	for _, text := range actions {
		turn, err := covel.Play(ctx, session.GetId(), text)
		if err != nil {
			return err
		}
		fmt.Printf("> %s\n%s\n\n", text, turn.GetNarrative())
	}
	recorded := 0
	if err := covel.Turns(ctx, session.GetId(), 1, func(*schedulerv1.Turn) error { recorded++; return nil }); err != nil {
		return err
	}
	fmt.Printf("%d turns recorded\n", recorded)
	_, err = covel.GetSession(ctx, "no-such-session")
	var failed *client.Error
	if errors.As(err, &failed) && failed.Resource != nil {
		fmt.Printf("asked for a missing session: %s %s %s/%s\n", failed.Code, failed.Reason, failed.Resource.Type, failed.Resource.Name)
	}
	return nil
}
