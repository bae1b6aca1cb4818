package scheduler

import "errors"

var (
	// ErrNotReady: the partition has no schedulable worker (unknown model
	// or tenant included: the HTTP layer asks the catalog whether it ever
	// held a worker there, and answers unknown_partition when not).
	ErrNotReady = errors.New("no schedulable worker")
	// ErrOverloaded: every schedulable worker of the partition is busy
	// (load shedding, busy.go).
	ErrOverloaded = errors.New("all workers are busy")
	// ErrInvalid: a request is well-formed JSON but its values do not fit
	// (the message names the field).
	ErrInvalid = errors.New("invalid request")
	// ErrWorkerNotFound: a reservation names a worker or rank that is not
	// schedulable in the partition.
	ErrWorkerNotFound = errors.New("worker rank not schedulable")
	// ErrReservationNotFound: no live reservation with that id.
	ErrReservationNotFound = errors.New("reservation not found")
	// ErrDuplicateReservation: the id is already booked on this node.
	ErrDuplicateReservation = errors.New("reservation already exists")
	// ErrCapacity: the booking would pass the node's bounds on what it
	// holds (--max-reservations, --max-reserved-blocks); nothing was
	// booked, and a retry succeeds once bookings end.
	ErrCapacity = errors.New("booking capacity reached")
	// ErrNoPendingSelection: no remembered /select choice has that
	// selection_id (never made, expired, or already booked).
	ErrNoPendingSelection = errors.New("no pending selection")
	// ErrInvalidConfig: Config.Validate refused the settings (the message
	// names the field).
	ErrInvalidConfig = errors.New("invalid scheduler configuration")
)
