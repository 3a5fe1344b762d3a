// nsim_tlm_core.h -- one simulated NeuronCore as a SystemC TLM-2.0 module.
//
// The core is the runtime C API's (include/neuronsim/runtime.h): this
// module is a client of libneuronsim like the torch plugin, and adds no
// timing model of its own.  A run's duration is the scheduler's simulated
// time for the program, to the picosecond; the module waits that long in
// SystemC time and then raises its completion interrupt.
//
// Target socket (host side), one address map:
//   [0, 0x1000)                 registers, 64-bit little-endian, 8-byte accesses
//   [hbm_base, hbm_base + size)  the core's HBM window: any length, b_transport
//                                and DMI (read / write)
// Registers (offsets; RO = read-only, WO = write-only):
//   0x000 ID         RO  0x4e53494d ('NSIM') << 32 | program format version
//   0x008 STATUS     RO  0 idle, 1 loaded, 2 running, 3 done, 4 fault
//   0x010 FAULT      RO  the last load / run's nsim_status (0: success)
//   0x018 DOORBELL   WO  1: run the loaded program with the bound tensors
//   0x020 PROG_ADDR  RW  HBM-window offset of the program image (.nsp bytes)
//   0x028 PROG_SIZE  RW  its size in bytes
//   0x030 LOAD       WO  1: load the image at PROG_ADDR (unloads the previous)
//   0x038 RUN_PS     RO  simulated duration of the last run, picoseconds
//   0x040 IRQ        RW  1 while the completion interrupt is raised; write 0 to clear
//   0x048 RUNS       RO  runs completed (faulted ones included)
//   0x050 T_ADDR     RW  tensor binding: HBM-window offset ...
//   0x058 T_SIZE     RW  ... and size in bytes of the tensor named in T_NAME
//   0x060 T_BIND     WO  1: bind as an input, 2: as an output, 0: clear all bindings;
//                        3 / 4: an input / output in external memory: T_ADDR is then
//                        an address behind the initiator socket
//
// Initiator socket (optional to bind): the core's DMA reaches an external
// tensor through it -- one b_transport per DMA access (the byte span the
// descriptor touches), reads before the transfer, writes after; the delay
// the target annotates is added to that DMA's completion, so an external
// memory or interconnect adds exactly its latency.  An error response
// faults the run (NSIM_EXEC_OOB).  Loosely timed, the access carries its
// time in the run as the b_transport delay (temporal decoupling); once that
// runs a global quantum (tlm_global_quantum) ahead of SystemC time, the core
// waits to catch up first.  In the approximately-timed mode
// (DMA_MODE 1) an access is BEGIN_REQ on nb_transport_fw and ends at the
// target's BEGIN_RESP (returned at once or sent later on the backward path,
// the core waiting for it in SystemC time); the access's latency is the
// time from request to response, and a run's SystemC time spent waiting
// counts toward its duration (the interrupt still comes at the scheduler's
// end of the run, or when the last response arrived if that is later).
//   0x068 DMA_MODE   RW  how external DMA accesses travel: 0 loosely timed (b_transport,
//                        the default), 1 approximately timed (nb_transport phases)
//   0x080 T_NAME     RW  64 bytes (8 registers): the tensor's name, NUL-padded
//   0x100 + 8e       RO  ENGINE_BUSY_PS[e], e = tensor, vector, scalar, gpsimd, sync
//   0x128 DMA_BYTES  RO  bytes the last run's DMAs moved
//   0x130 INSTRS     RO  instructions the last run executed
// Errors: an address in no window is TLM_ADDRESS_ERROR_RESPONSE; a command
// other than read / write, or a write to a read-only register (a read of a
// write-only one), TLM_COMMAND_ERROR_RESPONSE; a register access that is
// not 8 aligned bytes, or a streaming width shorter than the length,
// TLM_BURST_ERROR_RESPONSE; byte enables, TLM_BYTE_ENABLE_ERROR_RESPONSE.
// A program that faults sets STATUS = 4 and FAULT, and still interrupts.
#ifndef NSIM_TLM_CORE_H
#define NSIM_TLM_CORE_H

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <cstdint>
#include <string>
#include <vector>

extern "C" {
#include "neuronsim/runtime.h"
}

namespace nsim_sc {

enum Reg : uint64_t {
	REG_ID = 0x000,
	REG_STATUS = 0x008,
	REG_FAULT = 0x010,
	REG_DOORBELL = 0x018,
	REG_PROG_ADDR = 0x020,
	REG_PROG_SIZE = 0x028,
	REG_LOAD = 0x030,
	REG_RUN_PS = 0x038,
	REG_IRQ = 0x040,
	REG_RUNS = 0x048,
	REG_T_ADDR = 0x050,
	REG_T_SIZE = 0x058,
	REG_T_BIND = 0x060,
	REG_DMA_MODE = 0x068,
	REG_T_NAME = 0x080,          // 8 registers
	REG_ENGINE_BUSY_PS = 0x100,  // 5 registers
	REG_DMA_BYTES = 0x128,
	REG_INSTRS = 0x130,
	REG_WINDOW = 0x1000,
};

enum Status : uint64_t { ST_IDLE = 0, ST_LOADED = 1, ST_RUNNING = 2, ST_DONE = 3, ST_FAULT = 4 };

// a plain read / write payload of `len` bytes at `addr` (no byte enables,
// streaming width = length), ready for b_transport
inline void make_payload(tlm::tlm_generic_payload &p, tlm::tlm_command cmd, uint64_t addr, void *data, uint64_t len)
{
	p.set_command(cmd);
	p.set_address(addr);
	p.set_data_ptr(static_cast<unsigned char *>(data));
	p.set_data_length(static_cast<unsigned int>(len));
	p.set_streaming_width(static_cast<unsigned int>(len));
	p.set_byte_enable_ptr(nullptr);
	p.set_dmi_allowed(false);
	p.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
}

class TlmCore : public sc_core::sc_module {
public:
	tlm_utils::simple_target_socket<TlmCore> target;
	tlm_utils::simple_initiator_socket_optional<TlmCore> initiator;
	// completion interrupt: raised by the core, cleared by the host (IRQ register)
	sc_core::sc_signal<bool, sc_core::SC_MANY_WRITERS> irq;
	sc_core::sc_event done;              // notified when a run ends (or faults)

	// core: the runtime's core index; hbm_base / hbm_size: the HBM window in
	// the target socket's address map (hbm_base >= 0x1000)
	TlmCore(sc_core::sc_module_name name, int core = 0, uint64_t hbm_base = 0x100000000ull,
		uint64_t hbm_size = 64ull << 20);
	~TlmCore() override;

	uint64_t hbm_base() const { return base_; }
	uint64_t hbm_size() const { return size_; }

private:
	struct Binding {
		std::string name;
		uint64_t addr, size;
		bool output, external;
	};
	struct External {                   // an external tensor's access context
		TlmCore *core;
		uint64_t addr;
	};
	static uint64_t external_access(void *ctx, int is_write, uint64_t offset, void *data, uint64_t len,
					uint64_t at_ps);
	uint64_t external_at(tlm::tlm_generic_payload &p);
	tlm::tlm_sync_enum nb_transport_bw(tlm::tlm_generic_payload &p, tlm::tlm_phase &ph, sc_core::sc_time &d);

	void b_transport(tlm::tlm_generic_payload &p, sc_core::sc_time &delay);
	bool get_direct_mem_ptr(tlm::tlm_generic_payload &p, tlm::tlm_dmi &dmi);
	unsigned int transport_dbg(tlm::tlm_generic_payload &p);
	tlm::tlm_response_status access(tlm::tlm_generic_payload &p, sc_core::sc_time *delay);
	tlm::tlm_response_status reg_read(uint64_t off, uint64_t &v) const;
	tlm::tlm_response_status reg_write(uint64_t off, uint64_t v, const sc_core::sc_time &delay);
	void load_program();
	void run_thread();
	nsim_status execute(uint64_t &run_ps);

	int core_;
	uint64_t base_, size_;
	nsim_tensor *hbm_ = nullptr;
	nsim_model *model_ = nullptr;
	uint64_t status_ = ST_IDLE, fault_ = 0, prog_addr_ = 0, prog_size_ = 0, run_ps_ = 0, runs_ = 0;
	uint64_t t_addr_ = 0, t_size_ = 0;
	char t_name_[64] = {};
	std::vector<Binding> bindings_;
	nsim_exec_stats stats_{};
	sc_core::sc_event doorbell_;
	sc_core::sc_time doorbell_delay_;
	uint64_t dma_mode_ = 0;                        // 0 LT, 1 AT
	// the AT access in flight: its payload, when its response came
	tlm::tlm_generic_payload *pending_ = nullptr;
	bool resp_got_ = false;
	sc_core::sc_time resp_at_, waited_, run_start_;
	sc_core::sc_event resp_ev_;
};

}  // namespace nsim_sc

#endif
