package report

// LabUDPServerData is the data of `perfscope lab udp-server`: what it read
// before it stopped.
type LabUDPServerData struct {
	Received uint64 `json:"received"`
	Sockets  int    `json:"sockets"`
	Mode     string `json:"mode"`
}

// LabUDPFloodData is the data of `perfscope lab udp-flood`: what it sent.
type LabUDPFloodData struct {
	Sent      uint64 `json:"sent"`
	Errors    uint64 `json:"errors"`
	ElapsedNs int64  `json:"elapsed_ns"`
}

// jsonOnly: the lab's tools print JSON for the lab (and a script) to read.
var jsonOnly = []Format{JSON}

// Formats implements Formatted: JSON, for the lab to read.
func (LabUDPServerData) Formats() []Format { return jsonOnly }

// Formats implements Formatted: JSON, for the lab to read.
func (LabUDPFloodData) Formats() []Format { return jsonOnly }
