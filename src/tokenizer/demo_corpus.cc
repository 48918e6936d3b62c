#include "tokenizer/demo_corpus.h"

namespace fovea {

// Written for this project. Changing it changes every demo token id, so the demo model must be made again.
std::string_view demo_tokenizer_corpus() {
  return "Is there a bunk bed in this room? Answer yes or no.\n"
         "Please describe the image in detail. What is the color of the car on the left?\n"
         "The picture shows a small bedroom with two beds, a wooden table and a window.\n"
         "There is a bunk bed against the wall, and the lower bed has a blue blanket.\n"
         "A dog is sitting on the grass in front of the house, and the sky is clear.\n"
         "How many people are in the photo? There are three people standing near the water.\n"
         "The mountains in the background are covered with snow, and the trees are green.\n"
         "You are a helpful assistant. Answer the questions with a single word when you can.\n"
         "The answer is yes. The answer is no. I think that the image shows a room with a bed.\n"
         "Where is the cat? The cat is on the chair next to the door of the kitchen.\n"
         "What time of the day is it in this picture? It looks like the evening, the light is warm.\n"
         "This is a photo of a beach with white sand, blue water and a few small boats.\n"
         "The man is wearing a red shirt and the woman is holding a bag in her hand.\n"
         "Count the number of beds: one, two, three, four, five. There are 2 beds and 1 bunk bed.\n"
         "图中有几张床？请回答是或者否。这是一张卧室的照片，房间里有一张双层床和一张桌子。\n"
         "你是一个有用无害的人工智能助手，请根据图片回答用户的问题。\n"
         "图片中有一只狗坐在草地上，天空是蓝色的，远处有山和树。\n"
         "请详细描述这张图片。图中的人穿着红色的衣服，手里拿着一个包。\n"
         "是的，图中有双层床。不是，图中没有双层床。房间里有两张床和一个窗户。\n"
         "这张照片是在海边拍的，有白色的沙滩、蓝色的海水和几条小船。\n"
         "The weather is nice today, and the children are playing in the park near the river.\n"
         "Is this a photo of a city or a village? It is a city with tall buildings and busy streets.\n";
}

}  // namespace fovea
