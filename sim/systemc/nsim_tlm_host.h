// nsim_tlm_host.h -- a host-side driver for TlmCore over a TLM-2.0
// initiator socket: register and memory accesses by b_transport with a
// loosely-timed local offset (tlm_utils::tlm_quantumkeeper: the global
// quantum bounds how far the host runs ahead), program load, tensor binding,
// run-and-wait.  The examples and the tests drive the core through it; a
// platform's own CPU model would issue the same transactions.
#ifndef NSIM_TLM_HOST_H
#define NSIM_TLM_HOST_H

#include "nsim_tlm_core.h"

#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/tlm_quantumkeeper.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include "neuronsim/isa.h"
}

namespace nsim_sc {

// A program's image (.nsp bytes) and its tensor table, from an .nsasm file;
// false (and a message in err) when it does not read or assemble.
struct ProgramFile {
	int target = 0;                    // isa_target of its .target line
	std::vector<uint8_t> image;
	std::vector<isa_tensor> tensors;
};

inline bool assemble_text(const std::string &text, ProgramFile &pf, std::string &err)
{
	isa_diag d{};
	isa_program *p = nullptr;
	uint8_t *bin = nullptr;
	size_t len = 0;
	if (isa_asm(text.data(), text.size(), &p, &d) != ISA_OK || isa_program_encode(p, &bin, &len, &d) != ISA_OK) {
		err = d.msg;
		isa_program_free(p);
		return false;
	}
	pf.target = p->target;
	pf.image.assign(bin, bin + len);
	pf.tensors.assign(p->tensors, p->tensors + p->n_tensors);
	std::free(bin);
	isa_program_free(p);
	return true;
}

inline bool assemble_file(const std::string &path, ProgramFile &pf, std::string &err)
{
	std::ifstream f(path, std::ios::binary);
	if (!f) {
		err = "cannot read " + path;
		return false;
	}
	std::stringstream ss;
	ss << f.rdbuf();
	if (assemble_text(ss.str(), pf, err))
		return true;
	err = path + ": " + err;
	return false;
}

class Host : public sc_core::sc_module {
public:
	tlm_utils::simple_initiator_socket<Host> socket;
	tlm_utils::tlm_quantumkeeper qk;

	explicit Host(sc_core::sc_module_name name) : sc_module(name), socket("socket") { qk.reset(); }

	// one transaction; returns its response status (TLM_OK_RESPONSE on success)
	tlm::tlm_response_status transact(tlm::tlm_command cmd, uint64_t addr, void *data, uint64_t len)
	{
		tlm::tlm_generic_payload p;
		make_payload(p, cmd, addr, data, len);
		sc_core::sc_time t = qk.get_local_time();
		socket->b_transport(p, t);
		qk.set(t);
		if (qk.need_sync())
			qk.sync();
		return p.get_response_status();
	}

	bool write_reg(uint64_t reg, uint64_t v) { return transact(tlm::TLM_WRITE_COMMAND, reg, &v, 8) == tlm::TLM_OK_RESPONSE; }
	uint64_t read_reg(uint64_t reg)
	{
		uint64_t v = ~0ull;
		transact(tlm::TLM_READ_COMMAND, reg, &v, 8);
		return v;
	}
	bool write_mem(uint64_t addr, const void *src, uint64_t len)
	{
		return transact(tlm::TLM_WRITE_COMMAND, addr, const_cast<void *>(src), len) == tlm::TLM_OK_RESPONSE;
	}
	bool read_mem(uint64_t addr, void *dst, uint64_t len)
	{
		return transact(tlm::TLM_READ_COMMAND, addr, dst, len) == tlm::TLM_OK_RESPONSE;
	}

	// the program image written at window offset `off`, then loaded; true on success
	bool load(uint64_t base, uint64_t off, const std::vector<uint8_t> &image)
	{
		return write_mem(base + off, image.data(), image.size()) && write_reg(REG_PROG_ADDR, off) &&
		       write_reg(REG_PROG_SIZE, image.size()) && write_reg(REG_LOAD, 1) &&
		       read_reg(REG_STATUS) == ST_LOADED;
	}

	// binds the tensor `name` to [off, off + size) of the window (output or
	// input), or with `external` to that range behind the core's initiator socket
	bool bind(const std::string &name, uint64_t off, uint64_t size, bool output, bool external = false)
	{
		char buf[64] = {};
		if (name.size() >= sizeof(buf))
			return false;
		std::memcpy(buf, name.data(), name.size());
		for (unsigned i = 0; i < 8; i++) {
			uint64_t w;
			std::memcpy(&w, buf + 8 * i, 8);
			if (!write_reg(REG_T_NAME + 8 * i, w))
				return false;
		}
		return write_reg(REG_T_ADDR, off) && write_reg(REG_T_SIZE, size) &&
		       write_reg(REG_T_BIND, (output ? 2 : 1) + (external ? 2 : 0));
	}

	// rings the doorbell and waits for the interrupt; returns the simulated
	// time from the doorbell to the interrupt (SystemC time)
	sc_core::sc_time run(TlmCore &core)
	{
		qk.sync();   // the doorbell at the host's current time
		sc_core::sc_time start = sc_core::sc_time_stamp();
		if (!write_reg(REG_DOORBELL, 1))
			return sc_core::SC_ZERO_TIME;
		qk.sync();
		if (!core.irq.read())
			wait(core.done);
		sc_core::sc_time end = sc_core::sc_time_stamp();
		write_reg(REG_IRQ, 0);
		return end - start;
	}
};

}  // namespace nsim_sc

#endif
