// A valid program touching every operand kind, used as the starting point of
// the validator's negative tests: each test changes one thing.
#pragma once

static const char kBaseProgram[] = R"(; base program for negative tests
.target trn2
.semaphores 2
.scratch 1024
.tensor x input fp32 [128,64]
.tensor y output fp32 [128,64]
.tensor t internal fp32 [16] offset=0
.tensor c const int32 [2] data=0100000002000000
.dma lx direct dst=sbuf:fp32[0:128]{1x64} src=hbm(x):fp32[64x128]{1x64}
.dma sy direct dst=hbm(y):fp32[64x128]{1x64} src=sbuf:fp32[0:128]+1024{1x64}
.dma g gather dst=sbuf:fp32[0:8]+2048{1x64} src=hbm(x):fp32[64x128]{1x64} index=sbuf:int32[0:8]+4096{1x1}
;EXTRA_DMA

.engine sync
    dma_copy desc=lx queue=0 sem=0 value=1
    sem_wait sem=1 cond=is_ge value=1
    dma_copy desc=sy queue=1 sem=0 value=1
    ;EXTRA_SYNC
    end

.engine tensor
    sem_wait sem=0 cond=is_ge value=1
    load_stationary stationary=sbuf:bf16[0:128]+8192{1x128}
    multiply_moving dst=psum:fp32[0:128]{1x512} moving=sbuf:bf16[0:128]+16384{1x512}
    nc_transpose dst=psum:fp32[0:64]+2048{1x128} src=sbuf:fp32[0:128]+20480{1x64}
    end

.engine vector
    tensor_tensor dst=sbuf:fp32[0:128]+1024{1x64} src0=sbuf:fp32[0:128]{1x64} src1=sbuf:fp32[0:128]+256{1x64} op=add
    tensor_scalar dst=sbuf:fp32[0:128]+24576{1x64} src=sbuf:fp32[0:128]+24832{1x64} op0=multiply scalar0=2.0 op1=add scalar1=sbuf:fp32[0:128]+25088{1x1}
    tensor_reduce dst=sbuf:fp32[0:128]+25600{1x4} src=sbuf:fp32[0:128]+26112{16x4,1x16} op=max axes=2
    select dst=sbuf:fp32[0:128]+27648{1x8} pred=sbuf:uint8[0:128]+28160{1x8} on_true=sbuf:fp32[0:128]+28672{1x8} on_false=sbuf:fp32[0:128]+29184{1x8}
    nc_transpose dst=sbuf:fp32[0:16]+30720{1x32} src=sbuf:fp32[0:32]+31232{1x16}
    tensor_copy dst=sbuf:bf16[0:128]+32768{1x64} src=psum:fp32[0:128]+4096{1x64}
    sem_signal sem=1 op=add value=1
    end

.engine scalar
    activation dst=sbuf:bf16[0:128]+40960{1x64} src=psum:fp32[0:128]+6144{1x64} func=silu scale=sbuf:fp32[0:128]+41472{1x1} bias=0.5 reduce=add reduce_dst=sbuf:fp32[0:128]+41984{1x1}
    end

.engine gpsimd
    iota dst=sbuf:int32[0:128]+49152{4x8,1x4} base=3 pmul=1 mul=1,2
    affine_select dst=sbuf:fp32[0:128]+50176{1x64} src=sbuf:fp32[0:128]+50688{1x64} cmp=is_ge base=0 pmul=1 mul=-1 fill=-inf
    tensor_partition_reduce dst=sbuf:fp32[0:1]+51200{1x64} src=sbuf:fp32[0:128]+51712{1x64} op=add
    memset dst=sbuf:bf16[0:128]+52224{1x64} value=0
    end
)";
