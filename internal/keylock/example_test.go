package keylock_test

import (
	"context"
	"fmt"

	"github.com/airlockdev/airlock/internal/keylock"
)

func ExampleMap() {
	var locks keylock.Map // the zero value is ready
	ctx := context.Background()

	unlock, err := locks.Lock(ctx, "task-1/run-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... read, modify and write the run's file ...
	unlock()

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = locks.Lock(cancelled, "task-1/run-1")
	fmt.Println(err)
	// Output: context canceled
}
