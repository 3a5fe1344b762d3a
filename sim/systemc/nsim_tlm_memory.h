// nsim_tlm_memory.h -- a TLM-2.0 memory: `size` bytes at address 0 of its
// target socket.  Loosely timed (b_transport): each transaction adds
// `latency` to the initiator's delay.  Approximately timed (nb_transport_fw):
// BEGIN_REQ is accepted at once (TLM_UPDATED, END_REQ) and BEGIN_RESP comes
// back on the backward path `latency` later.  The external memory behind TlmCore's initiator socket
// in the examples and tests (a platform would put its own interconnect and
// memory models there).  Out-of-range accesses, byte enables and commands
// other than read / write get TLM error responses.
#ifndef NSIM_TLM_MEMORY_H
#define NSIM_TLM_MEMORY_H

#include <systemc>
#include <tlm>
#include <tlm_utils/peq_with_cb_and_phase.h>
#include <tlm_utils/simple_target_socket.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace nsim_sc {

class Memory : public sc_core::sc_module {
public:
	tlm_utils::simple_target_socket<Memory> target;
	sc_core::sc_time latency;           // added per transaction
	uint64_t reads = 0, writes = 0;     // transactions served
	// when each access was made: SystemC time + the annotated delay (LT),
	// SystemC time of BEGIN_REQ (AT)
	std::vector<sc_core::sc_time> when;
	std::vector<uint8_t> bytes;

	Memory(sc_core::sc_module_name name, uint64_t size, sc_core::sc_time lat = sc_core::SC_ZERO_TIME)
		: sc_module(name), target("target"), latency(lat), bytes(size, 0), peq_(this, &Memory::respond)
	{
		target.register_b_transport(this, &Memory::b_transport);
		target.register_nb_transport_fw(this, &Memory::nb_transport_fw);
	}

private:
	tlm_utils::peq_with_cb_and_phase<Memory> peq_;

	tlm::tlm_sync_enum nb_transport_fw(tlm::tlm_generic_payload &p, tlm::tlm_phase &ph, sc_core::sc_time &d)
	{
		if (ph == tlm::BEGIN_REQ) {
			when.push_back(sc_core::sc_time_stamp() + d);
			serve(p);
			peq_.notify(p, tlm::BEGIN_RESP, d + latency);
			ph = tlm::END_REQ;
			return tlm::TLM_UPDATED;
		}
		return tlm::TLM_COMPLETED;   // END_RESP
	}

	void respond(tlm::tlm_generic_payload &p, const tlm::tlm_phase &ph)
	{
		tlm::tlm_phase resp = ph;
		sc_core::sc_time d = sc_core::SC_ZERO_TIME;
		target->nb_transport_bw(p, resp, d);
	}

	void b_transport(tlm::tlm_generic_payload &p, sc_core::sc_time &delay)
	{
		when.push_back(sc_core::sc_time_stamp() + delay);
		if (serve(p))
			delay += latency;
	}

	// the access itself; false when it was refused (the response says why)
	bool serve(tlm::tlm_generic_payload &p)
	{
		uint64_t a = p.get_address(), n = p.get_data_length();
		tlm::tlm_command c = p.get_command();
		if (c != tlm::TLM_READ_COMMAND && c != tlm::TLM_WRITE_COMMAND) {
			p.set_response_status(tlm::TLM_COMMAND_ERROR_RESPONSE);
			return false;
		}
		if (p.get_byte_enable_ptr()) {
			p.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
			return false;
		}
		if (a > bytes.size() || n > bytes.size() - a || p.get_streaming_width() < n) {
			p.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
			return false;
		}
		if (c == tlm::TLM_READ_COMMAND) {
			std::memcpy(p.get_data_ptr(), bytes.data() + a, n);
			reads++;
		} else {
			std::memcpy(bytes.data() + a, p.get_data_ptr(), n);
			writes++;
		}
		p.set_response_status(tlm::TLM_OK_RESPONSE);
		return true;
	}
};

}  // namespace nsim_sc

#endif
