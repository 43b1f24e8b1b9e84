# Writes alexnet.csv, vgg16.csv and resnet50.csv into the directory given:
# python3 gen.py emu/commmodel/models
# Per-layer parameter bytes and a compute split for AlexNet, VGG-16, ResNet-50
# (torchvision's definitions, 224x224 input, FP32 parameters). Forward time is
# split in proportion to multiply-accumulates; backward is twice forward.
import sys
def conv(name,cin,cout,k,hw_out,bias=True,groups=1):
    p=cout*(cin//groups)*k*k+(cout if bias else 0)
    macs=cout*(cin//groups)*k*k*hw_out*hw_out
    return (name,p,macs)
def fc(name,i,o): return (name,i*o+o,i*o)
def bn(name,c,hw): return (name,2*c,2*c*hw*hw)  # scale+shift; tiny compute
alex=[conv('features.0',3,64,11,55),conv('features.3',64,192,5,27),conv('features.6',192,384,3,13),
      conv('features.8',384,256,3,13),conv('features.10',256,256,3,13),
      fc('classifier.1',256*6*6,4096),fc('classifier.4',4096,4096),fc('classifier.6',4096,1000)]
vgg=[];cin=3;hw=224;i=0
for v in [64,64,'M',128,128,'M',256,256,256,'M',512,512,512,'M',512,512,512,'M']:
    if v=='M': hw//=2; i+=1; continue
    vgg.append(conv('features.%d'%i,cin,v,3,hw)); cin=v; i+=1
vgg+= [fc('classifier.0',512*7*7,4096),fc('classifier.3',4096,4096),fc('classifier.6',4096,1000)]
# ResNet-50: one row per stem, bottleneck block and the classifier.
res=[]
p=0;m=0
for n,pp,mm in [conv('',3,64,7,112,bias=False),bn('',64,112)]: p+=pp;m+=mm
res.append(('conv1+bn1',p,m))
cin=64;hw=56
for li,(blocks,width,stride) in enumerate([(3,64,1),(4,128,2),(6,256,2),(3,512,2)]):
    out=width*4
    for b in range(blocks):
        s=stride if b==0 else 1
        hwo=hw//s
        parts=[conv('',cin,width,1,hw,False),bn('',width,hw),conv('',width,width,3,hwo,False),bn('',width,hwo),conv('',width,out,1,hwo,False),bn('',out,hwo)]
        if b==0: parts+=[conv('',cin,out,1,hwo,False),bn('',out,hwo)]
        res.append(('layer%d.%d'%(li+1,b),sum(x[1] for x in parts),sum(x[2] for x in parts)))
        cin=out;hw=hwo
res.append(fc('fc',2048,1000))
compute={'alexnet':13.54,'vgg16':73.55,'resnet50':65.14}  # ms per iteration, BS 32 FP16, Table 7 mean
for name,rows in [('alexnet',alex),('vgg16',vgg),('resnet50',res)]:
    tot=sum(r[2] for r in rows)
    with open(sys.argv[1]+'/'+name+'.csv','w') as f:
        f.write('layer,bytes,forward_ms,backward_ms\n')
        for n,pp,mm in rows:
            fwd=compute[name]/3*mm/tot
            f.write('%s,%d,%.4f,%.4f\n'%(n,4*pp,fwd,2*fwd))
    print(name,sum(r[1] for r in rows),'params',tot/1e9,'GMACs')
