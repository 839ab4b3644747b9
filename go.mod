module github.com/airlockdev/airlock

go 1.26.0

require (
	github.com/pkg/sftp v1.13.12
	github.com/spf13/afero v1.15.0
	github.com/stretchr/testify v1.12.1
	golang.org/x/crypto v0.59.0
	golang.org/x/sys v0.50.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/kr/fs v0.1.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/text v0.44.0 // indirect
)
