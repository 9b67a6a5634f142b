package client

import (
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is a failed call as a program reads it: the status code, the stable reason (google.rpc.ErrorInfo; the
// kernel's docs/api.md lists them) and the other google.rpc details the server sent.
type Error struct {
	Code    codes.Code
	Message string
	// ErrorInfo: a stable reason and its domain, "covel.dev", with its metadata.
	Reason   string
	Domain   string
	Metadata map[string]string
	// BadRequest: each field refused and what is wrong with it.
	FieldViolations []FieldViolation
	// ResourceInfo: what was not found (nil when the server named none).
	Resource *Resource
	// PreconditionFailure: each precondition not met.
	Preconditions []Precondition
	// RetryInfo: how long to wait before the same request may pass (nil: no retry will pass).
	RetryAfter *time.Duration
}

// FieldViolation is one field a request got wrong (google.rpc.BadRequest).
type FieldViolation struct{ Field, Description string }

// Resource names what was not found (google.rpc.ResourceInfo).
type Resource struct{ Type, Name string }

// Precondition is one precondition not met (google.rpc.PreconditionFailure).
type Precondition struct{ Type, Subject, Description string }

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Code, e.Reason, e.Message)
}

// ErrorOf decodes a failed call's status and details; nil for a nil error. An error that is not a gRPC status
// becomes codes.Unknown with its text.
func ErrorOf(err error) *Error {
	if err == nil {
		return nil
	}
	if found, ok := err.(*Error); ok {
		return found
	}
	st := status.Convert(err)
	found := &Error{Code: st.Code(), Message: st.Message()}
	for _, detail := range st.Details() {
		found.take(detail)
	}
	return found
}

func (e *Error) take(detail interface{}) {
	switch d := detail.(type) {
	case *errdetails.ErrorInfo:
		e.Reason, e.Domain, e.Metadata = d.GetReason(), d.GetDomain(), d.GetMetadata()
	case *errdetails.BadRequest:
		for _, v := range d.GetFieldViolations() {
			e.FieldViolations = append(e.FieldViolations, FieldViolation{v.GetField(), v.GetDescription()})
		}
	case *errdetails.ResourceInfo:
		e.Resource = &Resource{d.GetResourceType(), d.GetResourceName()}
	case *errdetails.PreconditionFailure:
		for _, v := range d.GetViolations() {
			e.Preconditions = append(e.Preconditions, Precondition{v.GetType(), v.GetSubject(), v.GetDescription()})
		}
	case *errdetails.RetryInfo:
		wait := time.Duration(d.GetRetryDelay().GetSeconds())*time.Second + time.Duration(d.GetRetryDelay().GetNanos())
		e.RetryAfter = &wait
	}
}
