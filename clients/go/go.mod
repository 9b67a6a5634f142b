module covel.dev/api

go 1.19

require (
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250218202821-56aae31c358a
	google.golang.org/grpc v1.71.0
	google.golang.org/protobuf v1.36.6
)
