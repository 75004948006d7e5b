import torch

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
feat = x.exp()
l1 = feat.sum()
l2 = (feat * feat).sum()
loss = l1 + l2
loss.backward()
loss.backward()
