module github.com/hermesrun/hermes

go 1.26.0

require (
	github.com/alecthomas/kong v1.17.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)
