// nsim_tlm_core.cc -- the TLM-2.0 NeuronCore (nsim_tlm_core.h says what it
// offers).  Every register and window access is checked before it touches
// anything: a bad transaction gets a TLM error response, never a crash.
#include "nsim_tlm_core.h"

#include <cstring>

namespace nsim_sc {

using namespace sc_core;
using tlm::tlm_generic_payload;
using tlm::tlm_response_status;

static const uint64_t ID_VALUE = (0x4e53494dull << 32) | 0x0100u;   // 'NSIM', format 1.0

TlmCore::TlmCore(sc_module_name name, int core, uint64_t hbm_base, uint64_t hbm_size)
	: sc_module(name), target("target"), initiator("initiator"), irq("irq"), core_(core), base_(hbm_base),
	  size_(hbm_size)
{
	if (hbm_base < REG_WINDOW || hbm_size == 0 || hbm_base + hbm_size < hbm_base)
		SC_REPORT_FATAL("nsim/TlmCore", "the HBM window must start at 0x1000 or above and not wrap");
	nsim_status st = nsim_core_count() > 0 ? NSIM_SUCCESS : nsim_init();
	if (st == NSIM_SUCCESS)
		st = nsim_tensor_allocate(core_, size_, "systemc_hbm_window", &hbm_);
	if (st != NSIM_SUCCESS)
		SC_REPORT_FATAL("nsim/TlmCore", (std::string("cannot set up the core: ") + nsim_last_error()).c_str());
	nsim_tensor_memset(hbm_, 0, 0, size_);
	target.register_b_transport(this, &TlmCore::b_transport);
	target.register_get_direct_mem_ptr(this, &TlmCore::get_direct_mem_ptr);
	target.register_transport_dbg(this, &TlmCore::transport_dbg);
	initiator.register_nb_transport_bw(this, &TlmCore::nb_transport_bw);
	SC_HAS_PROCESS(TlmCore);
	SC_THREAD(run_thread);
}

TlmCore::~TlmCore()
{
	if (model_)
		nsim_unload(model_);
	nsim_tensor_free(hbm_);
}

// ---- registers -------------------------------------------------------------

tlm_response_status TlmCore::reg_read(uint64_t off, uint64_t &v) const
{
	if (off >= REG_T_NAME && off < REG_T_NAME + sizeof(t_name_)) {
		std::memcpy(&v, t_name_ + (off - REG_T_NAME), 8);
		return tlm::TLM_OK_RESPONSE;
	}
	if (off >= REG_ENGINE_BUSY_PS && off < REG_ENGINE_BUSY_PS + 5 * 8) {
		v = stats_.engine_busy_ps[(off - REG_ENGINE_BUSY_PS) / 8];
		return tlm::TLM_OK_RESPONSE;
	}
	switch (off) {
	case REG_ID: v = ID_VALUE; break;
	case REG_STATUS: v = status_; break;
	case REG_FAULT: v = fault_; break;
	case REG_PROG_ADDR: v = prog_addr_; break;
	case REG_PROG_SIZE: v = prog_size_; break;
	case REG_RUN_PS: v = run_ps_; break;
	case REG_IRQ: v = irq.read() ? 1 : 0; break;
	case REG_RUNS: v = runs_; break;
	case REG_T_ADDR: v = t_addr_; break;
	case REG_T_SIZE: v = t_size_; break;
	case REG_DMA_MODE: v = dma_mode_; break;
	case REG_DMA_BYTES: v = stats_.dma_bytes; break;
	case REG_INSTRS: v = stats_.instructions; break;
	case REG_DOORBELL:
	case REG_LOAD:
	case REG_T_BIND: return tlm::TLM_COMMAND_ERROR_RESPONSE;   // write-only
	default: return tlm::TLM_ADDRESS_ERROR_RESPONSE;
	}
	return tlm::TLM_OK_RESPONSE;
}

tlm_response_status TlmCore::reg_write(uint64_t off, uint64_t v, const sc_time &delay)
{
	if (off >= REG_T_NAME && off < REG_T_NAME + sizeof(t_name_)) {
		std::memcpy(t_name_ + (off - REG_T_NAME), &v, 8);
		return tlm::TLM_OK_RESPONSE;
	}
	switch (off) {
	case REG_PROG_ADDR: prog_addr_ = v; break;
	case REG_PROG_SIZE: prog_size_ = v; break;
	case REG_T_ADDR: t_addr_ = v; break;
	case REG_T_SIZE: t_size_ = v; break;
	case REG_DMA_MODE:
		if (v > 1 || status_ == ST_RUNNING)
			return tlm::TLM_GENERIC_ERROR_RESPONSE;
		dma_mode_ = v;
		break;
	case REG_IRQ:
		if (v != 0)
			return tlm::TLM_GENERIC_ERROR_RESPONSE;   // only software clears it
		irq.write(false);
		break;
	case REG_LOAD:
		if (v != 1)
			return tlm::TLM_GENERIC_ERROR_RESPONSE;
		if (status_ == ST_RUNNING)
			return tlm::TLM_GENERIC_ERROR_RESPONSE;
		load_program();
		break;
	case REG_T_BIND:
		if (v == 0) {
			bindings_.clear();
			break;
		}
		if (v < 1 || v > 4 || status_ == ST_RUNNING)
			return tlm::TLM_GENERIC_ERROR_RESPONSE;
		if (t_size_ == 0 || std::memchr(t_name_, 0, sizeof(t_name_)) == nullptr || !t_name_[0])
			return tlm::TLM_GENERIC_ERROR_RESPONSE;   // no size, or no name
		if (v <= 2 && (t_addr_ > size_ || t_size_ > size_ - t_addr_))
			return tlm::TLM_GENERIC_ERROR_RESPONSE;   // outside the window
		if (v >= 3 && t_addr_ + t_size_ < t_addr_)
			return tlm::TLM_GENERIC_ERROR_RESPONSE;   // wraps the address space
		bindings_.push_back({ std::string(t_name_), t_addr_, t_size_, v == 2 || v == 4, v >= 3 });
		break;
	case REG_DOORBELL:
		if (v != 1)
			return tlm::TLM_GENERIC_ERROR_RESPONSE;
		if (status_ == ST_RUNNING || !model_)
			return tlm::TLM_GENERIC_ERROR_RESPONSE;   // busy, or nothing loaded
		status_ = ST_RUNNING;
		doorbell_delay_ = delay;                      // the initiator's local time offset
		doorbell_.notify(SC_ZERO_TIME);
		break;
	case REG_ID:
	case REG_STATUS:
	case REG_FAULT:
	case REG_RUN_PS:
	case REG_RUNS:
	case REG_DMA_BYTES:
	case REG_INSTRS: return tlm::TLM_COMMAND_ERROR_RESPONSE;   // read-only
	default:
		if (off >= REG_ENGINE_BUSY_PS && off < REG_ENGINE_BUSY_PS + 5 * 8)
			return tlm::TLM_COMMAND_ERROR_RESPONSE;
		return tlm::TLM_ADDRESS_ERROR_RESPONSE;
	}
	return tlm::TLM_OK_RESPONSE;
}

// the program image from the HBM window: the runtime validates it (a bad
// image is a fault code, not a crash)
void TlmCore::load_program()
{
	if (model_) {
		nsim_unload(model_);
		model_ = nullptr;
	}
	nsim_status st = NSIM_INVALID;
	if (prog_size_ && prog_addr_ <= size_ && prog_size_ <= size_ - prog_addr_) {
		std::vector<uint8_t> img(prog_size_);
		st = nsim_tensor_read(hbm_, img.data(), prog_addr_, prog_size_);
		if (st == NSIM_SUCCESS)
			st = nsim_load(img.data(), img.size(), core_, &model_);
	}
	fault_ = st;
	status_ = st == NSIM_SUCCESS ? ST_LOADED : ST_FAULT;
	if (st != NSIM_SUCCESS)
		model_ = nullptr;
}

// ---- transactions ----------------------------------------------------------

tlm_response_status TlmCore::access(tlm_generic_payload &p, sc_time *delay)
{
	tlm::tlm_command cmd = p.get_command();
	uint64_t addr = p.get_address(), len = p.get_data_length();
	unsigned char *data = p.get_data_ptr();
	if (cmd != tlm::TLM_READ_COMMAND && cmd != tlm::TLM_WRITE_COMMAND)
		return tlm::TLM_COMMAND_ERROR_RESPONSE;
	if (p.get_byte_enable_ptr())
		return tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE;
	if (p.get_streaming_width() < len || !data)
		return tlm::TLM_BURST_ERROR_RESPONSE;
	if (addr >= base_ && addr - base_ < size_) {
		uint64_t off = addr - base_;
		if (len > size_ - off)
			return tlm::TLM_ADDRESS_ERROR_RESPONSE;
		nsim_status st = cmd == tlm::TLM_READ_COMMAND ? nsim_tensor_read(hbm_, data, off, len)
							      : nsim_tensor_write(hbm_, data, off, len);
		return st == NSIM_SUCCESS ? tlm::TLM_OK_RESPONSE : tlm::TLM_GENERIC_ERROR_RESPONSE;
	}
	if (addr >= REG_WINDOW)
		return tlm::TLM_ADDRESS_ERROR_RESPONSE;
	if (len != 8 || addr % 8)
		return tlm::TLM_BURST_ERROR_RESPONSE;
	uint64_t v = 0;
	if (cmd == tlm::TLM_READ_COMMAND) {
		tlm_response_status r = reg_read(addr, v);
		if (r == tlm::TLM_OK_RESPONSE)
			std::memcpy(data, &v, 8);
		return r;
	}
	if (!delay)   // debug writes do not ring doorbells or load programs
		return addr == REG_DOORBELL || addr == REG_LOAD || addr == REG_T_BIND
			       ? tlm::TLM_COMMAND_ERROR_RESPONSE
			       : (std::memcpy(&v, data, 8), reg_write(addr, v, SC_ZERO_TIME));
	std::memcpy(&v, data, 8);
	return reg_write(addr, v, *delay);
}

void TlmCore::b_transport(tlm_generic_payload &p, sc_time &delay)
{
	p.set_response_status(access(p, &delay));
	if (p.get_response_status() == tlm::TLM_OK_RESPONSE && p.get_address() >= base_)
		p.set_dmi_allowed(true);
}

unsigned int TlmCore::transport_dbg(tlm_generic_payload &p)
{
	tlm_response_status r = access(p, nullptr);
	p.set_response_status(r);
	return r == tlm::TLM_OK_RESPONSE ? p.get_data_length() : 0;
}

// DMI over the whole HBM window: the simulated HBM's host bytes
bool TlmCore::get_direct_mem_ptr(tlm_generic_payload &p, tlm::tlm_dmi &dmi)
{
	uint64_t addr = p.get_address();
	if (addr < base_ || addr - base_ >= size_)
		return false;
	dmi.set_dmi_ptr(static_cast<unsigned char *>(nsim_tensor_host_pointer(hbm_)));
	dmi.set_start_address(base_);
	dmi.set_end_address(base_ + size_ - 1);
	dmi.allow_read_write();
	dmi.set_read_latency(SC_ZERO_TIME);
	dmi.set_write_latency(SC_ZERO_TIME);
	return true;
}

// ---- runs ------------------------------------------------------------------

// a DMA's access to an external tensor: one b_transport on the initiator
// socket; its annotated delay is the latency the access adds
uint64_t TlmCore::external_access(void *ctx, int is_write, uint64_t offset, void *data, uint64_t len,
				  uint64_t at_ps)
{
	External *x = static_cast<External *>(ctx);
	TlmCore *c = x->core;
	if (x->core->initiator.size() == 0 || len > 0xffffffffull)
		return NSIM_EXT_ERROR;   // nothing bound behind the socket
	tlm_generic_payload p;
	make_payload(p, is_write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND, x->addr + offset, data, len);
	// the access's place in SystemC time: the run's start + at_ps; the core's
	// SystemC process is at run_start_ + waited_
	sc_time at = sc_time(static_cast<double>(at_ps), SC_PS), local = at > c->waited_ ? at - c->waited_ : SC_ZERO_TIME;
	if (c->dma_mode_ == 1 || local >= tlm::tlm_global_quantum::instance().get()) {
		sc_core::wait(local);   // AT issues at its time; LT catches up once a quantum ahead
		c->waited_ += local;
		local = SC_ZERO_TIME;
	}
	if (c->dma_mode_ == 1)
		return c->external_at(p);
	sc_time delay = local;
	c->initiator->b_transport(p, delay);
	if (p.get_response_status() != tlm::TLM_OK_RESPONSE || delay < local)
		return NSIM_EXT_ERROR;
	return static_cast<uint64_t>((delay - local).to_seconds() * 1e12 + 0.5);   // ps
}

// The base protocol from the initiator side: BEGIN_REQ; the response is
// the target's return (TLM_COMPLETED, or TLM_UPDATED with BEGIN_RESP, which
// END_RESP answers) or a later BEGIN_RESP on the backward path, which this
// waits for (run_thread's process: the scheduler is paused meanwhile).
uint64_t TlmCore::external_at(tlm_generic_payload &p)
{
	sc_time req = sc_time_stamp(), d = SC_ZERO_TIME, resp;
	tlm::tlm_phase ph = tlm::BEGIN_REQ;
	pending_ = &p;
	resp_got_ = false;
	tlm::tlm_sync_enum r = initiator->nb_transport_fw(p, ph, d);
	if (r == tlm::TLM_COMPLETED) {
		resp = req + d;
	} else if (r == tlm::TLM_UPDATED && ph == tlm::BEGIN_RESP) {
		resp = req + d;
		tlm::tlm_phase end = tlm::END_RESP;
		sc_time z = SC_ZERO_TIME;
		initiator->nb_transport_fw(p, end, z);
	} else {
		while (!resp_got_)
			wait(resp_ev_);
		resp = resp_at_;
	}
	pending_ = nullptr;
	waited_ += sc_time_stamp() - req;
	if (p.get_response_status() != tlm::TLM_OK_RESPONSE)
		return NSIM_EXT_ERROR;
	return static_cast<uint64_t>((resp - req).to_seconds() * 1e12 + 0.5);
}

tlm::tlm_sync_enum TlmCore::nb_transport_bw(tlm_generic_payload &p, tlm::tlm_phase &ph, sc_time &d)
{
	if (&p != pending_)
		return tlm::TLM_COMPLETED;   // not ours (nothing in flight): ignore
	if (ph == tlm::BEGIN_RESP) {
		resp_at_ = sc_time_stamp() + d;
		resp_got_ = true;
		resp_ev_.notify(d);
		return tlm::TLM_COMPLETED;   // the initiator ends the transaction here
	}
	return tlm::TLM_ACCEPTED;        // END_REQ: the response follows
}

nsim_status TlmCore::execute(uint64_t &run_ps)
{
	nsim_tensor_set *in = nullptr, *out = nullptr;
	std::vector<nsim_tensor *> slices;
	std::vector<External> ext(bindings_.size());
	nsim_status st = nsim_tensor_set_create(&in);
	if (st == NSIM_SUCCESS)
		st = nsim_tensor_set_create(&out);
	for (size_t i = 0; i < bindings_.size(); i++) {
		const Binding &b = bindings_[i];
		nsim_tensor *t = nullptr;
		if (st == NSIM_SUCCESS && b.external) {   // the simulator's copy; the bytes come and go over TLM
			st = nsim_tensor_allocate(core_, b.size, b.name.c_str(), &t);
			ext[i] = External{ this, b.addr };
			if (st == NSIM_SUCCESS)
				st = nsim_tensor_set_external(t, &TlmCore::external_access, &ext[i]);
		} else if (st == NSIM_SUCCESS) {
			st = nsim_tensor_slice(hbm_, b.addr, b.size, &t);
		}
		if (t)
			slices.push_back(t);
		if (st == NSIM_SUCCESS)
			st = nsim_tensor_set_add(b.output ? out : in, b.name.c_str(), t);
	}
	if (st == NSIM_SUCCESS)
		st = nsim_execute(model_, in, out);
	stats_ = nsim_exec_stats{};
	if (st == NSIM_SUCCESS || st >= NSIM_EXEC_BAD_INPUT)
		nsim_model_stats(model_, &stats_);
	run_ps = st == NSIM_SUCCESS ? stats_.total_ps : 0;
	for (nsim_tensor *t : slices)
		nsim_tensor_free(t);
	nsim_tensor_set_free(out);
	nsim_tensor_set_free(in);
	return st;
}

// A doorbell starts the run at the initiator's time (its local offset
// synchronized first); the core is busy for the scheduler's simulated
// duration, then the interrupt rises.
void TlmCore::run_thread()
{
	for (;;) {
		wait(doorbell_);
		wait(doorbell_delay_);
		uint64_t ps = 0;
		waited_ = SC_ZERO_TIME;
		nsim_status st = execute(ps);
		// time already spent waiting for AT responses counts toward the run
		sc_time run(static_cast<double>(ps), SC_PS);   // exact below 2^53 ps
		if (run > waited_)
			wait(run - waited_);
		run_ps_ = ps;
		fault_ = st;
		status_ = st == NSIM_SUCCESS ? ST_DONE : ST_FAULT;
		runs_++;
		irq.write(true);
		done.notify(SC_ZERO_TIME);
	}
}

}  // namespace nsim_sc
