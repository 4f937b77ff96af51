#!/usr/bin/env python3
"""A decode step's attention alone in onnxruntime (Python), at the Qwen3-0.6B shape: 4 rows, 16 query / 8 KV heads of
128, a 1,792-position KV buffer holding 1,600 valid positions per row, 28 layers, each with its own KV.

  mode gqa32 / gqa16      com.microsoft.GroupQueryAttention over fp32 / fp16 KV bound as past and present (in place),
                          at the default scale 1/sqrt(128)
  mode gqa32s1 / gqa16s1  the same at scale 1 (what QueryScale leaves; timing only: the query is not pre-scaled here)
  mode mm32 / mm16        standard ops reading each KV head once per step: FusedMatMul(q grouped [4,8,2,128], K,
                          transB) + mask + Softmax + MatMul(., V) (fp16: Cast of K and V to fp32 first)
  mode mt32               the same transposed: MatMul(K, q^T), Softmax over positions, FusedMatMul(V, p, transA)

usage: gqa_decode.py MODE [LAYERS=28] [THREADS=2] [prof] [basic]   (numpy, onnx, onnxruntime; prints ms per step)
Numbers in docs/benchmarks.md ("the attention scale on the query").
"""
import numpy as np, onnx, onnxruntime as ort, time, sys
from onnx import helper as h, TensorProto as T
B,HQ,HKV,D,S,L = 4,16,8,128,1792,int(sys.argv[2]) if len(sys.argv)>2 else 28
VALID=1600; G=HQ//HKV
mode=sys.argv[1]   # gqa32 gqa16 mm32 mm16
f16 = '16' in mode; kvt = T.FLOAT16 if f16 else T.FLOAT
nodes=[]; inputs=[h.make_tensor_value_info('q',T.FLOAT,[B,1,HQ*D]), h.make_tensor_value_info('seqlens',T.INT32,[B]), h.make_tensor_value_info('total',T.INT32,[]),
  h.make_tensor_value_info('mask',T.FLOAT,[B,1,1,S]), h.make_tensor_value_info('maskT',T.FLOAT,[B,1,S,1])]
outputs=[]; inits=[]
acc='q'
for l in range(L):
    pk,pv=f'pk{l}',f'pv{l}'
    inputs += [h.make_tensor_value_info(pk,kvt,[B,HKV,S,D]), h.make_tensor_value_info(pv,kvt,[B,HKV,S,D])]
    if mode.startswith('gqa'):
        q=acc; kk=f'k{l}'
        nodes.append(h.make_node('Slice',[acc,'s0','s1','s2'],[kk]))  # k,v = first HKV*D of q
        qq,kq=q,kk
        if f16:
            nodes += [h.make_node('Cast',[q],[f'q16_{l}'],to=T.FLOAT16), h.make_node('Cast',[kk],[f'k16_{l}'],to=T.FLOAT16)]
            qq,kq=f'q16_{l}',f'k16_{l}'
        o=f'o{l}'
        nodes.append(h.make_node('GroupQueryAttention',[qq,kq,kq,pk,pv,'seqlens','total'],[o+('h' if f16 else ''),f'prk{l}',f'prv{l}'],domain='com.microsoft',num_heads=HQ,kv_num_heads=HKV,scale=(1.0 if 's1' in mode else 1/np.sqrt(D))))
        if f16: nodes.append(h.make_node('Cast',[o+'h'],[o],to=T.FLOAT))
        outputs += [h.make_tensor_value_info(f'prk{l}',kvt,None),h.make_tensor_value_info(f'prv{l}',kvt,None)]
    else:
        qg=f'qg{l}'
        nodes.append(h.make_node('Reshape',[acc,'qshape'],[qg]))  # [B,HKV,G,D]
        K,V=pk,pv
        if f16:
            nodes += [h.make_node('Cast',[pk],[f'k32_{l}'],to=T.FLOAT), h.make_node('Cast',[pv],[f'v32_{l}'],to=T.FLOAT)]; K,V=f'k32_{l}',f'v32_{l}'
        if mode.startswith('mm'):
          nodes.append(h.make_node('FusedMatMul',[qg,K],[f'sc{l}'],domain='com.microsoft',transB=1,alpha=float(1/np.sqrt(D))))
          nodes.append(h.make_node('Add',[f'sc{l}','mask'],[f'scm{l}']))
          nodes.append(h.make_node('Softmax',[f'scm{l}'],[f'p{l}'],axis=-1))
          nodes.append(h.make_node('MatMul',[f'p{l}',V],[f'c{l}']))
          nodes.append(h.make_node('Reshape',[f'c{l}','oshape'],[f'o{l}']))
        else:
          nodes.append(h.make_node('Transpose',[qg],[f'qt{l}'],perm=[0,1,3,2]))
          nodes.append(h.make_node('MatMul',[K,f'qt{l}'],[f'sc{l}']))
          nodes.append(h.make_node('Add',[f'sc{l}','maskT'],[f'scm{l}']))
          nodes.append(h.make_node('Softmax',[f'scm{l}'],[f'p{l}'],axis=-2))
          nodes.append(h.make_node('FusedMatMul',[V,f'p{l}'],[f'c{l}'],domain='com.microsoft',transA=1))
          nodes.append(h.make_node('Transpose',[f'c{l}'],[f'ct{l}'],perm=[0,1,3,2]))
          nodes.append(h.make_node('Reshape',[f'ct{l}','oshape'],[f'o{l}']))
    nodes.append(h.make_node('Add',[acc,f'o{l}'],[f'a{l}'])); acc=f'a{l}'
outputs.insert(0,h.make_tensor_value_info(acc,T.FLOAT,None))
i64=lambda n,v: h.make_tensor(n,T.INT64,[len(v)],v)
inits=[i64('s0',[0]),i64('s1',[HKV*D]),i64('s2',[2]),i64('qshape',[B,HKV,G,D]),i64('oshape',[B,1,HQ*D])]
g=h.make_graph(nodes,'a',inputs,outputs,inits)
m=h.make_model(g,opset_imports=[h.make_opsetid('',17),h.make_opsetid('com.microsoft',1)]); m.ir_version=9
so=ort.SessionOptions(); so.graph_optimization_level=ort.GraphOptimizationLevel.ORT_ENABLE_BASIC if "basic" in sys.argv else ort.GraphOptimizationLevel.ORT_ENABLE_ALL; so.enable_profiling=len(sys.argv)>4; so.intra_op_num_threads=int(sys.argv[3]) if len(sys.argv)>3 else 2
s=ort.InferenceSession(m.SerializeToString(),so,providers=['CPUExecutionProvider'])
rng=np.random.default_rng(0)
npt=np.float16 if f16 else np.float32
kv={}
for l in range(L):
    kv[f'pk{l}']=ort.OrtValue.ortvalue_from_numpy(rng.standard_normal((B,HKV,S,D)).astype(npt))
    kv[f'pv{l}']=ort.OrtValue.ortvalue_from_numpy(rng.standard_normal((B,HKV,S,D)).astype(npt))
mask=np.zeros((B,1,1,S),np.float32); mask[...,VALID:]=-np.inf
q=rng.standard_normal((B,1,HQ*D)).astype(np.float32)*0.1
b=s.io_binding()
b.bind_cpu_input('q',q); b.bind_cpu_input('seqlens',np.full(B,VALID-1,np.int32)); b.bind_cpu_input('total',np.array(S,np.int32)); 
if mode.startswith('mm'): b.bind_cpu_input('mask',mask)
if mode.startswith('mt'): b.bind_cpu_input('maskT',mask.reshape(B,1,S,1))
for n,v in kv.items(): b.bind_ortvalue_input(n,v)
if mode.startswith('gqa'):
    for l in range(L):
        b.bind_ortvalue_output(f'prk{l}',kv[f'pk{l}']); b.bind_ortvalue_output(f'prv{l}',kv[f'pv{l}'])
b.bind_output(acc)
for i in range(2): s.run_with_iobinding(b)
t=time.time(); n=5
for i in range(n): s.run_with_iobinding(b)
dt=(time.time()-t)/n
print(mode, 'L',L,'ms/step %.1f'%(dt*1000), 'KV GB read once %.2f'%(2*L*B*HKV*VALID*D*(2 if f16 else 4)/1e9))
out=b.copy_outputs_to_cpu()[0]; print('out', out.ravel()[:3])
