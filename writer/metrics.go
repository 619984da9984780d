package writer

import (
	"github.com/dropstream/dropstream/writer/sink"
)

// MetricUnmatchedCloses counts raw closes whose opening the diff did not
// know, so no session row was written. Int64Counter, unit {transition}.
const MetricUnmatchedCloses = "dropstream.writer.sessions.unmatched"

// instrumentationScope names the writer's meter and tracer.
const instrumentationScope = sink.InstrumentationScope
